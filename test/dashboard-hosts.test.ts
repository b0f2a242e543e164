// DNS rebinding: the dashboard answers only its own host names. The real `cronguard dashboard` on
// every dialect, in raw HTTP (a foreign Host gets 421, no page, no cookie, no token, and no POST
// changes anything; --allow-host adds names) and in chromium, whose --host-resolver-rules make a
// page loaded from rebind.test reach the loopback dashboard as a rebound name would. Then
// `allowedHosts` and `trustProxy` of a mounted guard.dashboard().
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Guard } from '../src/index.js';
import { browserTestsRun, CHROMIUM, serve } from './support/dashboard.js';
import { startDashboardCommand } from './support/dashboard-command.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { formSecrets, rawRequest } from './support/raw-http.js';
import { compiledCli } from './support/compiled-fixtures.js';

const sqlite = dialectTargets().find((target) => target.name === 'sqlite');
if (sqlite === undefined) throw new Error('no sqlite target');
const bin = compiledCli();

/** What the job's lock row and audit say: its pause, its pending trigger, its control changes. */
async function controlState(guard: Guard, job: string): Promise<{ paused: string | null; trigger: boolean; audit: string[] }> {
  const lock = (await guard.locks()).find((candidate) => candidate.name === job);
  return {
    paused: lock?.paused?.by ?? null,
    trigger: (lock?.pendingTrigger ?? null) !== null,
    audit: (await guard.controls(job)).map((record) => record.action),
  };
}

eachDialectAtOnce(
  'cronguard dashboard answers only its own names: a foreign Host gets no page, no cookie, no token, and changes nothing',
  async ({ target, expect }) => {
    const { guard, url: database, prefix } = await migratedGuard(target);
    await guard.run({ name: 'report', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 'done');
    const dashboard = await startDashboardCommand([
      ...['--database', database, '--table-prefix', prefix, '--port', '0'],
      ...['--allow-host', 'ops.tunnel.test', '--allow-host', 'proxy.test:8443'],
    ]);
    const { port } = new URL(dashboard.url);
    const at = (path: string): string => new URL(path, dashboard.url).toString();
    const foreign = `rebind.attacker.test:${port}`;

    // The rebound page asks for every page: no page, no cookie, no token, nothing of the job.
    for (const path of ['/', '/job?name=report', '/locks', '/run?id=x', '/nope']) {
      const refused = await rawRequest(at(path), { headers: { Host: foreign } });
      expect([path, refused.status]).toEqual([path, 421]);
      expect(refused.headers['set-cookie']).toBeUndefined();
      expect(refused.body).not.toMatch(/csrf|<form|report|<html/i);
    }
    // Even with a real cookie and token (from the dashboard's own name), a POST for the foreign
    // host changes nothing; sent to an own name with the foreign page's Origin, the CSRF check refuses it.
    const own = await rawRequest(at('/job?name=report'));
    expect(own.status).toBe(200);
    const { cookie, csrf } = formSecrets(own);
    expect([cookie, csrf].every((value) => value.length > 10)).toBe(true);
    const post = (path: string, host: string, origin: string, form: Record<string, string> = {}) =>
      rawRequest(at(path), {
        method: 'POST',
        headers: { Host: host, Origin: `http://${origin}`, Cookie: cookie },
        form: { csrf, job: 'report', reason: 'rebound', confirm: 'yes', force: 'yes', ...form },
      });
    for (const path of ['/job/pause', '/job/resume', '/job/trigger', '/job/unlock']) {
      expect([path, (await post(path, foreign, foreign)).status]).toEqual([path, 421]);
      expect([path, (await post(path, `127.0.0.1:${port}`, foreign)).status]).toEqual([path, 403]);
    }
    expect(await controlState(guard, 'report')).toEqual({ paused: null, trigger: false, audit: [] });
    expect((await guard.locks()).find((lock) => lock.name === 'report')?.state).toBe('held');

    // Its own names: the loopback ones with its port, and each --allow-host (without a port: any).
    const statusFor = async (host: string): Promise<number> => (await rawRequest(at('/'), { headers: { Host: host } })).status;
    for (const host of [
      `localhost:${port}`,
      `127.0.0.1:${port}`,
      `[::1]:${port}`,
      `ops.tunnel.test:${port}`,
      'OPS.tunnel.test.',
      'proxy.test:8443',
    ])
      expect([host, await statusFor(host)]).toEqual([host, 200]);
    for (const host of ['localhost:1', 'proxy.test:8444', 'proxy.test', 'localhost.attacker.test', ''])
      expect([host, await statusFor(host)]).toEqual([host, 421]);

    // Through the tunnel's name the controls work: the form's Origin is an allowed host.
    const tunnel = await rawRequest(at('/job?name=report'), { headers: { Host: 'proxy.test:8443' } });
    const secrets = formSecrets(tunnel);
    const paused = await rawRequest(at('/job/pause'), {
      method: 'POST',
      headers: { Host: 'proxy.test:8443', Origin: 'https://proxy.test:8443', Cookie: secrets.cookie },
      form: { csrf: secrets.csrf, job: 'report' },
    });
    expect([paused.status, paused.headers.location]).toEqual([303, '/job?name=report&notice=paused']);
    expect(await controlState(guard, 'report')).toEqual({ paused: 'dashboard', trigger: false, audit: ['pause'] });
    // The refusal is logged once per host, with no cookie and no token.
    expect(dashboard.stderr()).toMatch(/refused GET "\/" for host "rebind\.attacker\.test:\d+": not an allowed host/);
    expect(dashboard.stderr().match(/rebind\.attacker\.test/g)?.length).toBe(1);
    expect(dashboard.stderr()).not.toContain(csrf);
    expect(dashboard.stderr()).not.toContain(cookie.split('=')[1]);
    expect(await dashboard.stop()).toBe(0);
  },
  60_000,
);

describe('cronguard dashboard --allow-host', () => {
  it('refuses a value that is no host name, with exit 2', async () => {
    const { url: database, prefix } = await migratedGuard(sqlite);
    const run = promisify(execFile)(process.execPath, [
      bin,
      'dashboard',
      '--database',
      database,
      '--table-prefix',
      prefix,
      '--allow-host',
      'evil.test/x',
    ]);
    await expect(run).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/--allow-host must be a host name.*"evil\.test\/x"/),
    });
  });
});

describe('guard.dashboard() allowedHosts and trustProxy', () => {
  it('answers any host by default (authorize is the gate), and only the allowed ones with allowedHosts', async () => {
    const { guard } = await migratedGuard(sqlite);
    await guard.run({ name: 'report', lockAtMostFor: '1m' }, () => 'done');
    const open = await serve(guard.dashboard());
    expect((await rawRequest(`${open}/`, { headers: { Host: 'anything.test' } })).status).toBe(200);

    const listed = await serve(guard.dashboard({ readOnly: false, authorize: () => true, allowedHosts: ['app.example.com'] }));
    expect((await rawRequest(`${listed}/`, { headers: { Host: 'rebind.test' } })).status).toBe(421);
    const page = await rawRequest(`${listed}/job?name=report`, { headers: { Host: 'app.example.com' } });
    expect(page.status).toBe(200);
    const { cookie, csrf } = formSecrets(page);
    const pause = (origin: string) =>
      rawRequest(`${listed}/job/pause`, {
        method: 'POST',
        headers: { Host: 'app.example.com', Origin: origin, Cookie: cookie },
        form: { csrf, job: 'report' },
      });
    // The Origin is compared with the allowed hosts: a sibling's is refused, the app's own accepted.
    expect((await pause('https://evil.example.com')).status).toBe(403);
    expect((await pause('null')).status).toBe(403);
    expect(await controlState(guard, 'report')).toEqual({ paused: null, trigger: false, audit: [] });
    expect((await pause('https://app.example.com')).status).toBe(303);
    expect((await controlState(guard, 'report')).paused).toBe('dashboard');
  });

  it('believes X-Forwarded-Host and X-Forwarded-Proto only with trustProxy', async () => {
    const { guard } = await migratedGuard(sqlite);
    const forwarded = { Host: 'backend.internal:3000', 'X-Forwarded-Host': 'ops.example.com', 'X-Forwarded-Proto': 'https' };
    const untrusted = await serve(guard.dashboard({ readOnly: false, authorize: () => true, allowedHosts: ['ops.example.com'] }));
    expect((await rawRequest(`${untrusted}/`, { headers: forwarded })).status).toBe(421);
    // A client that sends the header itself, to a dashboard that does not trust it, gets nothing either.
    expect((await rawRequest(`${untrusted}/`, { headers: { ...forwarded, Host: 'rebind.test' } })).status).toBe(421);
    const direct = await rawRequest(`${untrusted}/`, { headers: { Host: 'ops.example.com', 'X-Forwarded-Proto': 'https' } });
    expect(direct.headers['set-cookie']?.[0]).not.toContain('Secure');

    const trusted = await serve(
      guard.dashboard({ readOnly: false, authorize: () => true, allowedHosts: ['ops.example.com'], trustProxy: true }),
    );
    const proxied = await rawRequest(`${trusted}/`, { headers: forwarded });
    expect(proxied.status).toBe(200);
    expect(proxied.headers['set-cookie']?.[0]).toMatch(/; Secure$/);
    expect((await rawRequest(`${trusted}/`, { headers: { ...forwarded, 'X-Forwarded-Host': 'rebind.test' } })).status).toBe(421);
  });

  it('checks allowedHosts and trustProxy now, naming the option and the value', async () => {
    const { guard } = await migratedGuard(sqlite);
    expect(() => guard.dashboard({ allowedHosts: 'ops.example.com' as unknown as string[] })).toThrow(
      /`allowedHosts`.*"ops\.example\.com"/,
    );
    expect(() => guard.dashboard({ allowedHosts: ['ops.example.com/x'] })).toThrow(/`allowedHosts`.*"ops\.example\.com\/x" in it/);
    expect(() => guard.dashboard({ trustProxy: 'yes' as unknown as boolean })).toThrow(/`trustProxy`.*"yes"/);
  });
});

describe.skipIf(!browserTestsRun())('DNS rebinding in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    // rebind.test resolves to 127.0.0.1: what an attacker's name does once it re-resolves.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--host-resolver-rules=MAP rebind.test 127.0.0.1'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  eachDialectAtOnce(
    'a page loaded from http://rebind.test:PORT gets no dashboard and cannot pause a job; the own name can',
    async ({ target, expect }) => {
      const { guard, url: database, prefix } = await migratedGuard(target);
      await guard.run({ name: 'report', lockAtMostFor: '1m' }, () => 'done');
      const dashboard = await startDashboardCommand(['--database', database, '--table-prefix', prefix, '--port', '0']);
      const { port } = new URL(dashboard.url);
      const context = await browser.newContext();
      try {
        const page = await context.newPage();
        const response = await page.goto(`http://rebind.test:${port}/job?name=report`);
        // Reached the dashboard (the resolver rule works: a name that did not resolve would throw).
        expect(response?.status()).toBe(421);
        expect(await page.locator('form').count()).toBe(0);
        expect(await context.cookies()).toEqual([]);
        // The attacker's script, same-origin with the rebound name: POSTs the pause form and a trigger.
        const statuses = await page.evaluate(async () => {
          const send = async (path: string): Promise<number> =>
            (
              await fetch(path, {
                method: 'POST',
                headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
                body: 'job=report&reason=rebound&force=yes',
              })
            ).status;
          return [await send('/job/pause'), await send('/job/trigger'), await (await fetch('/job?name=report')).status];
        });
        expect(statuses).toEqual([421, 421, 421]);
        expect(await controlState(guard, 'report')).toEqual({ paused: null, trigger: false, audit: [] });

        // The same browser on the dashboard's own name has the controls: the test can tell them apart.
        await page.goto(`${dashboard.url}job?name=report`);
        await page.getByRole('button', { name: 'Pause' }).click();
        await page.waitForURL(/notice=paused/);
        expect((await controlState(guard, 'report')).paused).toBe('dashboard');
      } finally {
        await context.close();
        await dashboard.stop();
      }
    },
    60_000,
  );
});
