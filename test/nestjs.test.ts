// cronguard/nestjs: the module (in process, on every dialect) and real Nest apps as OS processes
// (test/fixtures/nest-app: CommonJS, experimentalDecorators, emitDecoratorMetadata, as Nest apps are
// built), two replicas per dialect with an every-second job.
import 'reflect-metadata';
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import type { LoggerService } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CronguardModule, CRONGUARD_MODULE_OPTIONS, Guard, GuardedCron } from '../src/nestjs/index.js';
import { setModuleGuard } from '../src/nestjs/guarded-cron.js';
import { createGuard } from '../src/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { withGuardOn } from './support/guards.js';
import { explainedByOtherSlots, runsWithoutHold, type LockHold } from './support/lock-holds.js';
import { spreadOffsetMs } from '../src/core/spread.js';
import { databaseUrl, dialectTargets, uniquePrefix, type DialectTarget } from './support/dialects.js';
import { assertBuilt, describeResult, repoRoot, runProcess, type ProcessResult } from './support/run-process.js';

/** A Nest LoggerService that keeps what it is told. */
function recordingNestLogger(): LoggerService & { lines: string[] } {
  const lines: string[] = [];
  const keep =
    (level: string) =>
    (message: unknown, ...rest: unknown[]) =>
      void lines.push(`${level} [${String(rest.at(-1))}] ${String(message)}`);
  return { lines, log: keep('log'), warn: keep('warn'), error: keep('error') };
}

describe.each(dialectTargets())('CronguardModule on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('forRoot provides the Guard, migrates at start-up when asked, and shuts the guard down with the app', async () => {
      const prefix = uniquePrefix();
      const logger = recordingNestLogger();
      const app = await NestFactory.createApplicationContext(
        CronguardModule.forRoot({ database: databaseUrl(target), tablePrefix: prefix, migrate: true }),
        { logger },
      );
      const guard = app.get(Guard);
      expect(guard).toBeInstanceOf(Guard);
      expect(guard.dialect).toBe(target.name);
      // Migrated: the tables exist.
      expect(await guard.run({ name: 'nest.job', lockAtMostFor: '1m' }, () => 'ran')).toEqual({
        executed: true,
        value: 'ran',
      });
      // Nest's Logger is the guard's logger, context 'Cronguard'.
      guard.guarded({ name: 'nest.unslotted', lockAtMostFor: '1m' });
      expect(logger.lines.filter((line) => line.startsWith('warn'))).toEqual([
        expect.stringMatching(/^warn \[Cronguard\] Job "nest.unslotted" is decorated without `cron` and with lockAtLeastFor 0/),
      ]);
      await app.close();
      const after = await guard.run({ name: 'nest.job', lockAtMostFor: '1m' }, () => 'ran');
      expect(after).toMatchObject({ executed: false, reason: 'error', error: { code: 'GUARD_CLOSED' } });
    });

    it('forRootAsync builds the options from injected providers; without `migrate` it leaves the tables alone', async () => {
      const prefix = uniquePrefix();
      const url = databaseUrl(target);
      // eslint-disable-next-line @typescript-eslint/no-extraneous-class -- a Nest module is a class
      class ConfigModule {}
      const config = {
        module: ConfigModule,
        providers: [{ provide: 'CONFIG', useValue: { url, prefix } }],
        exports: ['CONFIG'],
      };
      const app = await NestFactory.createApplicationContext(
        CronguardModule.forRootAsync({
          imports: [config],
          inject: ['CONFIG'],
          useFactory: async (settings: { url: string; prefix: string }) => ({
            database: settings.url,
            tablePrefix: settings.prefix,
          }),
        }),
        { logger: false },
      );
      try {
        const guard = app.get(Guard);
        expect(app.get(CRONGUARD_MODULE_OPTIONS)).toEqual({ database: url, tablePrefix: prefix });
        await expect(guard.locks()).rejects.toMatchObject({ code: 'TABLE_MISSING' });
        await guard.migrate();
        expect(await guard.locks()).toEqual([]);
      } finally {
        await app.close();
      }
    });
  });
});

describe('the subpath', () => {
  it("is the only part of the built package that imports @nestjs: 'cronguard' alone loads no Nest package", () => {
    const built = join(repoRoot, 'dist', 'src');
    const importers = readdirSync(built, { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.js') && readFileSync(join(built, file), 'utf8').includes("from '@nestjs/"))
      .sort();
    expect(importers).toEqual([join('nestjs', 'cronguard-module.js'), join('nestjs', 'guarded-cron.js')]);
  });
});

describe('@GuardedCron', () => {
  it('checks its options when applied: a TypeError naming the option and the job', () => {
    expect(() => GuardedCron('61 * * * *', { name: 'bad', lockAtMostFor: '1m' })).toThrow(
      /^Expected `cron` of job "bad" to be a cron expression like/,
    );
    expect(() => GuardedCron('* * * * *', { name: 'bad', lockAtMostFor: '1m', timeZone: 'Mars/Olympus' })).toThrow(
      new TypeError(`Expected \`timezone\` of job "bad" to be an IANA time zone like 'Europe/Paris', got "Mars/Olympus"`),
    );
    expect(() => GuardedCron('* * * * *', { name: 'bad', lockAtMostFor: '1m', spread: '5 minutes' })).toThrow(
      new TypeError(`Expected \`spread\` of job "bad" to be a duration like '30s' (or 0 for none), got "5 minutes"`),
    );
    expect(() => GuardedCron('*/2 * * * * *', { name: 'bad', lockAtMostFor: '1m', spread: '2s' })).toThrow(
      /^Expected `spread` of job "bad" to be shorter than the time between two of its slots \(2000 ms\), got "2s"/,
    );
  });

  it('with `spread`, a call whose offset wait ends after the guard shut down runs nothing and logs nothing', async () => {
    // A name whose offset in a 1,999 ms window is at least 1,950 ms: called early in its 2 s slot,
    // the call is still waiting for its offset when the guard shuts down.
    const window = 1_999;
    const name = Array.from({ length: 5_000 }, (_, index) => `spread-closed-${index}`).find(
      (candidate) => spreadOffsetMs(candidate, window) >= 1_950,
    );
    if (name === undefined) throw new Error('no name with a late enough offset');
    const warnings: string[] = [];
    const guard = createGuard({
      database: 'sqlite::memory:',
      logger: { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) },
    });
    await guard.migrate();
    setModuleGuard(guard);
    try {
      let ran = 0;
      class Target {
        run(): void {
          ran += 1;
        }
      }
      const descriptor: PropertyDescriptor = { value: Target.prototype.run, writable: true, configurable: true };
      GuardedCron('*/2 * * * * *', { name, lockAtMostFor: '10s', spread: `${window}ms` })(Target.prototype, 'run', descriptor);
      const sinceSlot = Date.now() % 2_000;
      if (sinceSlot > 1_000) await sleep(2_000 - sinceSlot);
      const call = (descriptor.value as () => Promise<unknown>).call(new Target());
      await guard.shutdown();
      // The wait ends after the shutdown (it held neither the shutdown nor the process open).
      expect(await call).toBeUndefined();
      expect(ran).toBe(0);
      // A run asked of a closed guard is refused with a warning; a spread wait that ended after
      // the shutdown asks for none.
      expect(warnings).toEqual([]);
    } finally {
      setModuleGuard(undefined);
      await guard.shutdown();
    }
  });
});

const fixture = join(repoRoot, 'test', 'fixtures', 'nest-app');
const RUN_FOR_MS = 11_000;
const scenarios = [
  { scenario: 'guarded-above', title: '@guarded above @Cron, with `cron`' },
  { scenario: 'cron-above', title: '@Cron above @guarded, with `cron`' },
  { scenario: 'guarded-cron', title: '@GuardedCron' },
] as const;

describe('real Nest apps, two processes per dialect, an every-second job', () => {
  let tscResult: ProcessResult;

  beforeAll(async () => {
    assertBuilt();
    // The fixture's package.json ("type": "commonjs") stops the package's self-reference: link it as
    // an installed package would be.
    const link = join(fixture, 'node_modules', 'cronguard');
    rmSync(link, { force: true });
    mkdirSync(join(fixture, 'node_modules'), { recursive: true });
    symlinkSync(repoRoot, link, 'dir');
    rmSync(join(fixture, 'out'), { recursive: true, force: true });
    tscResult = await runProcess(join(repoRoot, 'node_modules', '.bin', 'tsc'), ['-p', join(fixture, 'tsconfig.json')], repoRoot, 170_000);
  }, 180_000);
  afterAll(() => rmSync(join(fixture, 'node_modules'), { recursive: true, force: true }));

  it.each(scenarios)(
    '$title: every second runs exactly once',
    async ({ scenario }) => {
      expect(tscResult.code, describeResult('tsc', tscResult)).toBe(0);
      const targets = dialectTargets().filter((target): target is DialectTarget => target.serverUrl !== null);
      const results = await Promise.all(
        targets.map(async (target) => {
          const url = databaseUrl(target);
          const prefix = uniquePrefix();
          const replicas = await Promise.all(
            [1, 2].map(() =>
              runProcess(process.execPath, [join(fixture, 'out', 'app.js'), url, prefix, scenario, String(RUN_FOR_MS)], fixture, 90_000),
            ),
          );
          return { target: target.name, url, prefix, replicas };
        }),
      );
      for (const { target, url, prefix, replicas } of results) {
        const linesOf = <T>(tag: string): T[] =>
          replicas.flatMap((replica) =>
            replica.stdout.split('\n').flatMap((line) => (line.startsWith(`${tag} `) ? [JSON.parse(line.slice(tag.length + 1)) as T] : [])),
          );
        const runs = linesOf<{ slot: string | null; at: number }>('RAN');
        const holds = linesOf<LockHold>('HELD');
        const skips = linesOf<{ job: string; slot: string | null; reason: string; error: string | null; asked: number | null; at: number }>(
          'SKIP',
        ).filter((skip) => skip.job === 'tick');
        const slots = runs.map((run) => run.slot);
        expect(slots, target).not.toContain(null);
        const times = [...new Set(slots as string[])].map((slot) => Date.parse(slot)).sort((a, b) => a - b);
        // The seconds both apps were up for: from the later app's first run or skip. Before it, the
        // other app may be held up by its start-up (on SQLite, better-sqlite3 waits synchronously
        // while the starting app's migrate() holds the file's write lock).
        const upAt = replicas.map((replica) =>
          Math.min(
            ...replica.stdout
              .split('\n')
              .filter((line) => /^(RAN|SKIP) /.test(line))
              .map((line) => (JSON.parse(line.slice(line.indexOf(' ') + 1)) as { at: number }).at),
          ),
        );
        expect(upAt.every(Number.isFinite), `${target}: an app that neither ran nor skipped`).toBe(true);
        const bothUp = Math.ceil(Math.max(...upAt) / 1_000) * 1_000;
        const first = Math.max(times[0] ?? 0, bothUp - 1_000);
        const last = times.at(-1) ?? 0;
        const missing: string[] = [];
        for (let t = first + 1_000; t < last; t += 1_000) if (!times.includes(t)) missing.push(new Date(t).toISOString());
        // The guard's warning of slots no replica ran, for seconds that are indeed missing (counted below).
        const warnsOfMissing = (line: string): boolean => {
          const [, from, to] = /Job "tick" missed \d+ slot\(s\) from (\S+) to (\S+?): no replica ran them/.exec(line) ?? [];
          if (from === undefined || to === undefined) return false;
          // Indeed missing, before both apps were up too.
          for (let t = Date.parse(from); t <= Date.parse(to); t += 1_000) if (times.includes(t) || t <= (times[0] ?? 0)) return false;
          return true;
        };
        for (const replica of replicas) {
          expect(replica.code, describeResult(`${target} replica`, replica)).toBe(0);
          // @nestjs/schedule's cron library says so when a busy machine fires a timer late; nothing else.
          expect(
            replica.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('[Cron] Missed execution deadline by ')),
            target,
          ).toEqual([]);
          // Only the job's lines: no warning (the job has its slot), no error, but the warning of a
          // second no replica ran.
          const others = replica.stdout
            .trim()
            .split('\n')
            .filter((line) => !/^(RAN|DONE|SPREAD|SKIP|HELD) /.test(line) && !warnsOfMissing(line));
          expect(others, `${target}: ${JSON.stringify(others)}`).toEqual([]);
        }
        expect(slots.length, `${target}: duplicates in ${slots.join(', ')}`).toBe(times.length);
        // A second the replicas fired but did not run: each refusal must be one the runs explain
        // ('slot-done' once a later second's run had started: a take a stalled machine sent late;
        // 'locked' while another second's run held the lock, from its take's send to its release's
        // answer). Anything else is a bug.
        const ranAt = runs.map((run) => ({ slot: run.slot, start: run.at }));
        const explained = (skip: (typeof skips)[number]): boolean => explainedByOtherSlots(skip, holds, ranAt);
        // Every run's hold was reported (the rule above rests on them).
        expect(runsWithoutHold(ranAt, holds)).toEqual([]);
        const refusals = skips.filter((skip) => skip.slot !== null && missing.includes(skip.slot));
        expect(
          refusals.filter((skip) => !explained(skip)),
          `${target}: missing ${missing.join(', ')}; refusals ${JSON.stringify(refusals)}`,
        ).toEqual([]);
        // A second no replica fired: both replicas' timers missed it (a stalled machine). The cron
        // library says when it skips a fire it was too late for, though not which one, so as many
        // such seconds may be missing as the replica that skipped fewer skipped (and one).
        const unfired = missing.filter((slot) => !refusals.some((skip) => skip.slot === slot));
        const skipped = replicas.map(
          (replica) => replica.stderr.split('\n').filter((line) => /^\[Cron\] .*Skipping execution/.test(line)).length,
        );
        const allowed = Math.max(1, Math.min(...skipped));
        expect(
          unfired.length,
          `${target}: missing ${missing.join(', ')}; refusals ${JSON.stringify(refusals)}; fires skipped per replica: ${skipped.join(', ')}`,
        ).toBeLessThanOrEqual(allowed);
        expect(last - first, target).toBeGreaterThanOrEqual(6_000);
        if (scenario === 'guarded-cron') await expectSpreadRuns(target, url, prefix, replicas);
      }
    },
    120_000,
  );
});

/** The `spread` job of the '@GuardedCron' app ('spread-b', every two seconds over 1.9 s). */
const SPREAD_JOB = 'spread-b';
const SPREAD_OFFSET_MS = spreadOffsetMs(SPREAD_JOB, 1_900);

/**
 * `@GuardedCron`'s `spread`: each slot ran once across both replicas, the offset after its nominal
 * slot (ctx.slot, and the history's), and the slot ledger counts none of them late.
 */
async function expectSpreadRuns(target: string, url: string, prefix: string, replicas: ProcessResult[]): Promise<void> {
  expect(SPREAD_OFFSET_MS).toBe(1_105);
  const runs = replicas.flatMap((replica) =>
    replica.stdout
      .split('\n')
      .flatMap((line) =>
        line.startsWith('SPREAD ') ? [JSON.parse(line.slice(7)) as { slot: string | null; start: number; pid: number }] : [],
      ),
  );
  const slots = runs.map((run) => run.slot);
  expect(runs.length, target).toBeGreaterThanOrEqual(3);
  expect(new Set(slots).size, `${target}: each slot once, got ${slots.join(', ')}`).toBe(slots.length);
  for (const run of runs) {
    const slot = Date.parse(run.slot ?? '');
    expect(slot % 2_000, target).toBe(0);
    // The run starts the offset after its slot, never before.
    expect(run.start - slot, target).toBeGreaterThanOrEqual(SPREAD_OFFSET_MS - 20);
  }
  await withGuardOn(url, prefix, async (guard) => {
    const { runs: history } = await guard.history({ job: SPREAD_JOB });
    expect(history.map((run) => run.slot?.toISOString()).sort(), target).toEqual([...slots].sort());
    // Late by the ledger's rule (started more than lateAfter, 1 s, past the offset): only a run a
    // stalled machine held up, at most one (without the window, every run of this job would be late).
    const delays = history.map((run) => run.startedAt.getTime() - (run.slot as Date).getTime());
    const late = delays.filter((delay) => delay > SPREAD_OFFSET_MS + 1_000).length;
    expect(late, `${target}: delays ${delays.join(', ')} ms`).toBeLessThanOrEqual(1);
    const [ledger] = await guard.slots({ job: SPREAD_JOB, since: '1m' });
    // The declaration carries the window: the ledger counts no other spread run late.
    expect(ledger?.counts.late, target).toBe(late);
    expect(ledger?.counts.succeeded, target).toBeGreaterThanOrEqual(runs.length - 1 - late);
  });
}
