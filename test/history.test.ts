// The run history on every dialect: each outcome recorded, crashed runs marked, pages and filters,
// and none of it with `history: false`.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { startWorker } from './support/processes.js';

describe.each(dialectTargets())('history on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('records a succeeded run with its duration and lock, on the database clock', async () => {
      const { guard } = await migratedGuard(target, { lockedBy: 'replica-a' });
      const before = Date.now();
      await guard.run({ name: 'ok', lockAtMostFor: '1m' }, () => sleep(120));
      const { runs, next } = await guard.history();
      expect(next).toBeUndefined();
      expect(runs).toHaveLength(1);
      const run = runs[0];
      expect(run).toMatchObject({
        job: 'ok',
        status: 'succeeded',
        lockedBy: 'replica-a',
        overran: false,
        error: null,
        slot: null,
      });
      expect(run?.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(run?.durationMs).toBeGreaterThanOrEqual(100);
      expect(run?.durationMs).toBeLessThan(5_000);
      expect(run?.lockAtMostForMs).toBe(60_000);
      // The database clock is this host's clock here: the times fall around the run.
      expect(run?.startedAt.getTime()).toBeGreaterThanOrEqual(before - 1_000);
      expect(run?.finishedAt?.getTime()).toBeGreaterThanOrEqual(run?.startedAt.getTime() ?? Infinity);
      expect((run?.lockUntil?.getTime() ?? 0) - (run?.startedAt.getTime() ?? 0)).toBe(60_000);
    });

    it('records a failed run with its error message, cut to 4,096 characters', async () => {
      const { guard } = await migratedGuard(target);
      await expect(guard.run({ name: 'bad', lockAtMostFor: '1m' }, () => Promise.reject(new Error('disk full')))).rejects.toThrow();
      const long = `${'é'.repeat(5_000)}`;
      await expect(guard.run({ name: 'bad', lockAtMostFor: '1m' }, () => Promise.reject(new Error(long)))).rejects.toThrow();
      const { runs } = await guard.history({ job: 'bad' });
      expect(runs.map((run) => run.status)).toEqual(['failed', 'failed']);
      expect(runs[1]?.error).toBe('disk full');
      expect(runs[0]?.error).toBe('é'.repeat(4_096));
    });

    it('marks overran a run that finished after its lock expired', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      await guard.run({ name: 'slow', lockAtMostFor: '300ms' }, () => sleep(500));
      expect((await guard.history({ job: 'slow' })).runs[0]).toMatchObject({ status: 'succeeded', overran: true });

      // Lost: another execution took the expired lock; the late finisher still records its outcome.
      const other = guardOn(url, prefix).guard;
      // Its lock expires 300 ms after its take (a loaded machine may take a while to take it): the
      // other tries once the body has run for 400 ms.
      let bodyStarted!: () => void;
      const started = new Promise<void>((resolve) => (bodyStarted = resolve));
      const late = guard.run({ name: 'lost', lockAtMostFor: '300ms' }, async () => {
        bodyStarted();
        await sleep(700);
      });
      await started;
      await sleep(400);
      expect((await other.run({ name: 'lost', lockAtMostFor: '1m' }, () => 'took over')).executed).toBe(true);
      await late;
      const { runs } = await guard.history({ job: 'lost' });
      // Newest first: the successor (on time), then the late finisher (overran, not abandoned: it finished).
      expect(runs.map((run) => [run.status, run.overran])).toEqual([
        ['succeeded', false],
        ['succeeded', true],
      ]);
    });

    it('marks abandoned the run of a holder killed with SIGKILL, when another execution takes over', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const doomed = startWorker<{ type: 'running' }>('hold-worker.ts', [url, prefix, 'crash', '1000']);
      await doomed.next('running');
      doomed.child.kill('SIGKILL');
      await doomed.exited;
      expect((await guard.history({ job: 'crash' })).runs.map((run) => run.status)).toEqual(['running']);
      expect(await guard.run({ name: 'crash', lockAtMostFor: '1m' }, () => 'early')).toEqual({
        executed: false,
        reason: 'locked',
      });
      await sleep(1_100);
      expect(await guard.run({ name: 'crash', lockAtMostFor: '1m' }, () => 'recovered')).toEqual({
        executed: true,
        value: 'recovered',
      });
      const { runs } = await guard.history({ job: 'crash' });
      expect(runs.map((run) => [run.status, run.lockedBy.startsWith('doomed-')])).toEqual([
        ['succeeded', false],
        ['abandoned', true],
      ]);
      expect(runs[1]?.finishedAt).toBeNull();
    });

    it('pages newest first with a cursor, and filters by job, status and time', async () => {
      const { guard } = await migratedGuard(target);
      for (let i = 0; i < 7; i += 1) {
        await guard.run({ name: i % 2 === 0 ? 'even' : 'odd', lockAtMostFor: '1m' }, () => i);
        await sleep(5);
      }
      const seen: string[] = [];
      let page = await guard.history({ limit: 3 });
      const sizes = [page.runs.length];
      seen.push(...page.runs.map((run) => run.id));
      while (page.next !== undefined) {
        page = await guard.history({ limit: 3, before: page.next });
        sizes.push(page.runs.length);
        seen.push(...page.runs.map((run) => run.id));
      }
      expect(sizes).toEqual([3, 3, 1]);
      expect(new Set(seen).size).toBe(7);
      const all = (await guard.history()).runs;
      expect(all.map((run) => run.id)).toEqual(seen);
      const times = all.map((run) => run.startedAt.getTime());
      expect(times).toEqual([...times].sort((a, b) => b - a));
      expect((await guard.history({ job: 'even' })).runs).toHaveLength(4);
      expect((await guard.history({ status: 'failed' })).runs).toHaveLength(0);
      expect((await guard.history({ since: '1h' })).runs).toHaveLength(7);
      expect((await guard.history({ until: '1h' })).runs).toHaveLength(0);
      expect((await guard.history({ since: all[2]?.startedAt })).runs).toHaveLength(3);
      await expect(guard.history({ before: 'nonsense' })).rejects.toThrow(TypeError);
      await expect(guard.history({ limit: 0 })).rejects.toThrow('Expected `limit` to be an integer from 1 to 1000, got 0');
    });

    it('lists locks held and free with the time left, and frees one by hand', async () => {
      const { guard } = await migratedGuard(target, { lockedBy: 'replica-a' });
      await guard.run({ name: 'free', lockAtMostFor: '1m' }, () => 1);
      await guard.run({ name: 'kept', lockAtMostFor: '1m', lockAtLeastFor: '30s' }, () => 1);
      let release!: () => void;
      const holding = guard.run({ name: 'busy', lockAtMostFor: '1m' }, () => new Promise<void>((r) => (release = r)));
      await expect.poll(() => release).toBeTypeOf('function');
      const locks = await guard.locks();
      expect(locks.map((lock) => [lock.name, lock.state, lock.running, lock.lockedBy])).toEqual([
        ['busy', 'held', true, 'replica-a'],
        ['free', 'free', false, 'replica-a'],
        ['kept', 'held', false, 'replica-a'],
      ]);
      const kept = locks.find((lock) => lock.name === 'kept');
      expect(kept?.remainingMs).toBeGreaterThan(25_000);
      expect(kept?.remainingMs).toBeLessThanOrEqual(30_000);
      expect(locks.find((lock) => lock.name === 'free')?.remainingMs).toBe(0);
      expect(await guard.unlock('kept')).toBe(true);
      expect(await guard.unlock('kept')).toBe(false);
      expect((await guard.run({ name: 'kept', lockAtMostFor: '1m' }, () => 'again')).executed).toBe(true);
      release();
      await holding;
    });

    it("prunes by historyRetention after a run, at most once an hour, keeping each job's newest run", async () => {
      const { guard: writer, url, prefix } = await migratedGuard(target);
      for (const name of ['x', 'x', 'x', 'y', 'y']) await writer.run({ name, lockAtMostFor: '1m' }, () => 1);
      await sleep(150);
      const retaining = guardOn(url, prefix, { historyRetention: '100ms' }).guard;
      await retaining.run({ name: 'x', lockAtMostFor: '1m' }, () => 1);
      const jobs = async () => (await writer.history()).runs.map((run) => run.job).sort();
      await expect.poll(jobs).toEqual(['x', 'y']);
      // Within the hour, a second run does not prune again.
      await writer.run({ name: 'y', lockAtMostFor: '1m' }, () => 1);
      await sleep(150);
      await retaining.run({ name: 'x', lockAtMostFor: '1m' }, () => 1);
      await sleep(200);
      expect(await jobs()).toEqual(['x', 'x', 'y', 'y']);
    });

    it('records skipped executions only with recordSkips', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const recording = guardOn(url, prefix, { recordSkips: true }).guard;
      await guard.run({ name: 'skip', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 1);
      expect((await guard.run({ name: 'skip', lockAtMostFor: '1m' }, () => 2)).executed).toBe(false);
      expect((await recording.run({ name: 'skip', lockAtMostFor: '1m' }, () => 3)).executed).toBe(false);
      const { runs } = await guard.history({ job: 'skip' });
      expect(runs.map((run) => run.status).sort()).toEqual(['skipped', 'succeeded']);
    });

    it('keeps the newest real run at a prune, and doctor reads runs, not skips, with recordSkips', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const recording = guardOn(url, prefix, { recordSkips: true }).guard;
      await guard.run({ name: 'busy', lockAtMostFor: '1m' }, () => 1);
      const job = { name: 'busy', lockAtMostFor: '1m', lockAtLeastFor: '1m' };
      await guard.run(job, () => 2);
      // Losers record their skips just after the winner started: the newest rows are skips.
      for (let loser = 0; loser < 3; loser += 1) expect((await recording.run(job, () => 3)).executed).toBe(false);
      const [diagnosis] = await guard.doctor();
      expect(diagnosis).toMatchObject({ job: 'busy', runs: 2, succeeded: 2 });
      await sleep(20);
      await guard.prune(new Date(Date.now() + 60_000));
      const { runs } = await guard.history({ job: 'busy' });
      // The newest row (a skip) and the newest real run stay.
      expect(runs.map((run) => run.status)).toEqual(['skipped', 'succeeded']);
    });

    it('writes no run rows with history: false, and still locks, extends, releases and reports a lost lock', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target, { history: false, lockedBy: 'no-history' });
      const other = guardOn(url, prefix, { lockedBy: 'with-history' }).guard;
      // A win with an extend, twice (the second through the hinted take), and a failing run.
      for (let i = 0; i < 2; i += 1) {
        expect(await guard.run({ name: 'quiet', lockAtMostFor: '1m' }, (ctx) => ctx.extend('2m'))).toEqual({
          executed: true,
          value: true,
        });
      }
      await expect(guard.run({ name: 'quiet', lockAtMostFor: '1m' }, () => Promise.reject(new Error('no')))).rejects.toThrow('no');
      // Released each time: another replica takes it at once, and a held lock still skips.
      expect((await other.run({ name: 'quiet', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 'other')).executed).toBe(true);
      expect(await guard.run({ name: 'quiet', lockAtMostFor: '1m' }, () => 'again')).toEqual({
        executed: false,
        reason: 'locked',
      });
      // Slots still dedupe: they live in the lock row.
      const slot = new Date('2026-11-29T12:00:00.000Z');
      expect((await guard.run({ name: 'quiet-slot', lockAtMostFor: '1m', slot }, () => 1)).executed).toBe(true);
      expect(await other.run({ name: 'quiet-slot', lockAtMostFor: '1m', slot }, () => 2)).toEqual({
        executed: false,
        reason: 'slot-done',
      });
      // A lost lock is still reported: the release matches no row.
      const late = guard.run({ name: 'quiet-lost', lockAtMostFor: '300ms' }, () => sleep(700));
      await sleep(400);
      expect((await other.run({ name: 'quiet-lost', lockAtMostFor: '1m' }, () => 'took over')).executed).toBe(true);
      await late;
      expect(logger.warnings.join('\n')).toMatch(/outlived its lock/);
      // The only run rows are the other guard's two wins (it has history).
      const { runs } = await guard.history();
      expect(runs.map((run) => [run.job, run.lockedBy, run.status]).sort()).toEqual([
        ['quiet', 'with-history', 'succeeded'],
        ['quiet-lost', 'with-history', 'succeeded'],
      ]);
      expect(logger.errors).toEqual([]);
    });
    it('costs one statement per history() and locks() once the schema is known to have the controls', async () => {
      const log: CompiledQuery[] = [];
      const db = loggedKysely(target, databaseUrl(target), log);
      const guard = createGuard({ database: db, tablePrefix: uniquePrefix() });
      try {
        await guard.migrate();
        await guard.run({ name: 'counted', lockAtMostFor: '1m' }, () => undefined);
        await guard.history();
        // The replica's version row is written in the background after its first lock, whenever
        // that lands: a read of the schema version, the row's write, then the pruning of old rows
        // (admin/replicas.ts). Once the pruning is sent, none of it can fall among the statements
        // counted below (on a loaded machine the version read did, once); its writes are not counted anyway.
        await expect.poll(() => log.some((query) => /^\s*DELETE\b[^]*_replicas/i.test(query.sql))).toBe(true);
        const sent = () => log.filter((query) => !/^\s*(INSERT|UPDATE|DELETE)\b[^]*_replicas/i.test(query.sql));
        // The schema version is read until it shows the controls, then remembered (migrations only go forward).
        log.length = 0;
        expect((await guard.history({ job: 'counted' })).runs).toHaveLength(1);
        expect(sent().map((query) => query.sql)).toEqual([expect.stringContaining('_runs')]);
        log.length = 0;
        expect((await guard.locks()).map((lock) => lock.name)).toEqual(['counted']);
        // The lock table, and the replicas' versions (each holder's cronguard version).
        const tablesRead = sent().map((query) => /FROM ["`]?\w+_(locks|replicas)["`]?/.exec(query.sql)?.[1] ?? query.sql);
        expect(tablesRead.sort()).toEqual(['locks', 'replicas']);
      } finally {
        await guard.close();
        await db.destroy();
      }
    });
  });
});
