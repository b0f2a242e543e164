// Mounting the dashboard: at the root and under a basePath in node:http, under a connect-style
// app and a real Express 5 app (app.use(path, handler)), its options checked up front, and the
// `cronguard dashboard` command. The pages themselves are driven in dashboard-browser.test.ts.
import { spawn } from 'node:child_process';
import express from 'express';
import { describe, expect, it } from 'vitest';
import type { Guard } from '../src/index.js';
import { connectStyleApp, seedHistory, serve } from './support/dashboard.js';
import { databaseUrl, dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { compiledCli } from './support/compiled-fixtures.js';

const sqlite = dialectTargets().find((target) => target.name === 'sqlite');
if (sqlite === undefined) throw new Error('no sqlite target');
const bin = compiledCli();

/** Every href on a page. */
async function links(url: string): Promise<string[]> {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  return [...(await response.text()).matchAll(/href="([^"]*)"/g)].map((match) => match[1]?.replaceAll('&amp;', '&') ?? '');
}

/** Follows every link of the overview and of each page it leads to (one level): all answer 200. */
async function crawl(origin: string, start: string, prefix: string): Promise<void> {
  const first = await links(`${origin}${start}`);
  expect(first.length).toBeGreaterThan(5);
  for (const href of first) {
    expect(href.startsWith(`${prefix}/`)).toBe(true);
    expect((await fetch(`${origin}${href}`)).status).toBe(200);
  }
}

describe('dashboard mounting', () => {
  let guard: Guard;
  const seeded = async (): Promise<Guard> => {
    guard = (await migratedGuard(sqlite)).guard;
    await seedHistory(guard);
    return guard;
  };

  it('serves at the root of a node:http server, and 404s what is not its own', async () => {
    const url = await serve((await seeded()).dashboard());
    await crawl(url, '/', '');
    expect((await fetch(`${url}/nope`)).status).toBe(404);
    expect((await fetch(`${url}/job?name=no-such-job`)).status).toBe(404);
    expect((await fetch(`${url}/run?id=${'x'.repeat(40)}`)).status).toBe(404);
    expect((await fetch(`${url}/`, { method: 'DELETE' })).status).toBe(405);
    const head = await fetch(`${url}/`, { method: 'HEAD' });
    expect([head.status, await head.text()]).toEqual([200, '']);
  }, 30_000);

  it('serves under a basePath in node:http: links carry it, other paths are not its own', async () => {
    const url = await serve((await seeded()).dashboard({ basePath: '/ops/cron/' }));
    await crawl(url, '/ops/cron', '/ops/cron');
    await crawl(url, '/ops/cron/locks', '/ops/cron');
    expect((await fetch(`${url}/`)).status).toBe(404);
    expect((await fetch(`${url}/ops/cronx`)).status).toBe(404);
  }, 30_000);

  it('mounts in a real Express app under app.use(path): links carry the mount path, other paths go to the app', async () => {
    const app = express();
    app.use('/admin/cronguard', (await seeded()).dashboard());
    app.use((_req, res) => void res.status(404).type('text/plain').send('the app’s own 404'));
    const url = await serve(app);
    await crawl(url, '/admin/cronguard/', '/admin/cronguard');
    await crawl(url, '/admin/cronguard/locks', '/admin/cronguard');
    const missing = await fetch(`${url}/admin/cronguard/nope`);
    expect([missing.status, await missing.text()]).toEqual([404, 'the app’s own 404']);
    expect((await fetch(`${url}/elsewhere`)).status).toBe(404);
  }, 30_000);

  it('mounts connect-style (Express app.use): links carry the mount path, other paths go to next()', async () => {
    const app = connectStyleApp('/admin/cronguard', (await seeded()).dashboard());
    const url = await serve(app);
    await crawl(url, '/admin/cronguard/', '/admin/cronguard');
    const missing = await fetch(`${url}/admin/cronguard/nope`);
    expect([missing.status, await missing.text()]).toEqual([404, 'the app’s own 404']);
  }, 30_000);

  it('checks its options now, naming the option and the value', async () => {
    const { guard: plain } = await migratedGuard(sqlite);
    expect(() => plain.dashboard({ readOnly: false })).toThrow(TypeError);
    expect(() => plain.dashboard({ readOnly: false })).toThrow(/`authorize`.*readOnly: false/);
    expect(() => plain.dashboard({ readOnly: 'no' as unknown as boolean })).toThrow(/`readOnly`.*"no"/);
    expect(() => plain.dashboard({ basePath: 'ops' })).toThrow(/`basePath`.*"ops"/);
    expect(() => plain.dashboard({ authorize: true as unknown as () => boolean })).toThrow(/`authorize`/);
  });

  it('logs every error through the guard logger (method, path, the error; no cookie, no token), its page linking under the mount path', async () => {
    const { guard: unmigrated, logger } = guardOn(databaseUrl(sqlite), 'never_migrated_');
    const app = express();
    app.use('/admin/cronguard', unmigrated.dashboard({ readOnly: false, authorize: () => true }));
    const url = await serve(app);
    const secret = 'A'.repeat(22);
    const failed = await fetch(`${url}/admin/cronguard/locks?x=1`, { headers: { Cookie: `cronguard_csrf=${secret}` } });
    expect(failed.status).toBe(500);
    const hrefs = [...(await failed.text()).matchAll(/href="([^"]*)"/g)].map((match) => match[1]);
    expect(hrefs).toEqual(['/admin/cronguard/', '/admin/cronguard/locks', '/admin/cronguard/']);
    expect(logger.errors).toHaveLength(1);
    expect(logger.errors[0]).toMatch(/^Dashboard GET "\/locks" failed: .*cronguard migrate/);
    // A refused control (no token) is a warning; a missing page is not logged.
    const refused = await fetch(`${url}/admin/cronguard/job/pause`, {
      method: 'POST',
      headers: { Cookie: `cronguard_csrf=${secret}`, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: `job=report&csrf=${secret}`,
    });
    expect(refused.status).toBe(403);
    expect((await fetch(`${url}/admin/cronguard/run?id=`)).status).toBe(404);
    expect(logger.errors).toHaveLength(1);
    expect(logger.warnings).toEqual([
      expect.stringMatching(/^Dashboard POST "\/job\/pause" refused \(403\): The form has no valid CSRF token/),
    ]);
    expect([...logger.errors, ...logger.warnings].join('\n')).not.toContain(secret);
  });

  it('shows a missing table as the guard says it, never a driver message or URL', async () => {
    const { guard: unmigrated } = guardOn(databaseUrl(sqlite), 'never_migrated_');
    const response = await fetch(`${await serve(unmigrated.dashboard())}/`);
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).toContain('cronguard migrate');
    expect(text).not.toMatch(/sqlite:|\.sqlite/);
  });
});

describe('cronguard dashboard', () => {
  /** Starts the command; resolves with its first stdout line and stderr so far, and a stop function. */
  function startCommand(args: string[]): Promise<{ line: string; stderr: () => string; stop: () => Promise<number | null> }> {
    const child = spawn(process.execPath, [bin, 'dashboard', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    return new Promise((resolve, reject) => {
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        stdout += chunk;
        if (stdout.includes('\n')) {
          resolve({
            line: stdout.split('\n')[0] ?? '',
            stderr: () => stderr,
            stop: () => {
              child.kill('SIGTERM');
              return exited;
            },
          });
        }
      });
      void exited.then((code) => reject(new Error(`cronguard dashboard exited with ${code}: ${stderr}`)));
    });
  }

  it('serves on loopback, prints its URL, and stops on SIGTERM; warns on another host without --read-only', async () => {
    const { url: database, prefix } = await migratedGuard(sqlite);
    const start = (args: string[]): ReturnType<typeof startCommand> => startCommand([...args, '--table-prefix', prefix]);
    const loopback = await start(['--database', database, '--port', '0']);
    const url = /http:\/\/127\.0\.0\.1:\d+\//.exec(loopback.line)?.[0];
    expect(loopback.line).toContain('with controls');
    expect((await fetch(`${url}`)).status).toBe(200);
    expect(loopback.stderr()).toBe('');
    expect(await loopback.stop()).toBe(0);

    const open = await start(['--database', database, '--port', '0', '--host', '0.0.0.0']);
    expect(open.stderr()).toMatch(/warning: .*0\.0\.0\.0.*--read-only/);
    expect(await open.stop()).toBe(0);
    const readOnly = await start(['--database', database, '--port', '0', '--host', '0.0.0.0', '--read-only']);
    expect(readOnly.line).toContain('read-only');
    expect(readOnly.stderr()).toBe('');
    const page = await (await fetch(readOnly.line.match(/http:\/\/\S+/)?.[0] ?? '')).text();
    // No control (the overview's filter is a GET form, which changes nothing).
    expect(page).not.toContain('method="post"');
    expect(page).toContain('<form class="filter" method="get"');
    // No connection URL on the page.
    expect(page).not.toContain(database.slice('sqlite:'.length));
    expect(await readOnly.stop()).toBe(0);
  }, 60_000);
});
