// The shared suite: every test here runs on SQLite, PostgreSQL and MariaDB.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { GuardError } from '../src/index.js';
import { dialectTargets, uniquePrefix, type DialectTarget } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { frozenLink } from './support/frozen-link.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';

/** Another session holding the (free) lock rows in an open transaction, so that an acquire's UPDATE waits for them. */
async function holdLockRows(target: DialectTarget, url: string, prefix: string): Promise<RawDatabase> {
  const raw = await openRaw(target.name, url);
  await raw.exec(target.name === 'postgres' ? 'BEGIN' : 'START TRANSACTION');
  await raw.query(`SELECT * FROM ${prefix}locks FOR UPDATE`);
  return raw;
}

describe.each(dialectTargets())('guard on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('runs the job when the lock is free and returns its value', async () => {
      const { guard } = await migratedGuard(target);
      const result = await guard.run({ name: 'report', lockAtMostFor: '1m' }, async (ctx) => `ran ${ctx.name}`);
      expect(result).toEqual({ executed: true, value: 'ran report' });
    });

    it('skips with reason "locked" while another execution holds the lock', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const other = guardOn(url, prefix).guard;
      let release!: () => void;
      const holding = guard.run({ name: 'held', lockAtMostFor: '1m' }, () => new Promise<void>((r) => (release = r)));
      // The job has started: the lock is held.
      await expect.poll(() => release).toBeTypeOf('function');
      const skipped = await other.run({ name: 'held', lockAtMostFor: '1m' }, () => 'ran');
      expect(skipped).toEqual({ executed: false, reason: 'locked' });
      release();
      expect((await holding).executed).toBe(true);
      expect((await other.run({ name: 'held', lockAtMostFor: '1m' }, () => 'ran')).executed).toBe(true);
    });

    it.for([{ history: true }, { history: false }])(
      'frees a released lock at once: runs back to back all run, history: $history',
      async ({ history }) => {
        // Without lockAtLeastFor the release makes the lock free from now. On PostgreSQL the
        // columns keep milliseconds and a stored time is rounded: a release that wrote now() left
        // the lock held up to 0.5 ms longer, and a fifth of such back-to-back takes lost.
        const { guard } = await migratedGuard(target, { history });
        const results = [];
        for (let i = 0; i < 500; i += 1) results.push(await guard.run({ name: 'back-to-back', lockAtMostFor: '1m' }, () => i));
        expect(results.filter((result) => !result.executed)).toEqual([]);
      },
    );

    it('keeps the lock for lockAtLeastFor after a short job, then frees it', async () => {
      const { guard } = await migratedGuard(target);
      const job = { name: 'short', lockAtMostFor: '1m', lockAtLeastFor: '1s' };
      expect((await guard.run(job, () => 1)).executed).toBe(true);
      expect(await guard.run(job, () => 2)).toEqual({ executed: false, reason: 'locked' });
      await sleep(1_100);
      expect(await guard.run(job, () => 3)).toEqual({ executed: true, value: 3 });
    });

    it("rejects with the job's own error after releasing the lock", async () => {
      const { guard } = await migratedGuard(target);
      const failure = new Error('job failed');
      await expect(guard.run({ name: 'fails', lockAtMostFor: '1m' }, () => Promise.reject(failure))).rejects.toBe(failure);
      expect(await guard.run({ name: 'fails', lockAtMostFor: '1m' }, () => 'again')).toEqual({
        executed: true,
        value: 'again',
      });
    });

    it('takes over a lock whose lockAtMostFor has passed', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const dead = guardOn(url, prefix).guard;
      // A holder that never releases: its job outlives lockAtMostFor. Waited for by its event, not a
      // fixed sleep: on a busy machine the new guard's first connection can take longer than that.
      const taken = new Promise((resolve) => dead.on('acquired', resolve));
      const stuck = dead.run({ name: 'expires', lockAtMostFor: '500ms' }, () => sleep(1_500));
      await taken;
      expect(await guard.run({ name: 'expires', lockAtMostFor: '500ms' }, () => 'early')).toEqual({
        executed: false,
        reason: 'locked',
      });
      await sleep(600);
      expect(await guard.run({ name: 'expires', lockAtMostFor: '500ms' }, () => 'late')).toEqual({
        executed: true,
        value: 'late',
      });
      await stuck;
    });

    it("leaves the successor's lock alone when a holder that outlived lockAtMostFor releases late", async () => {
      const { guard: a, url, prefix, logger: aLogger } = await migratedGuard(target);
      const b = guardOn(url, prefix).guard;
      const c = guardOn(url, prefix).guard;
      const job = { name: 'owner-check', lockAtMostFor: '1s' };
      // A's lock expires 1 s after A took it (waited for by its event: on a busy machine the take
      // itself can take a while), while A's job still runs: it runs until B's job has started (a
      // fixed 1.5 s let a busy machine's B take the lock only after A had released it).
      let bStarted!: () => void;
      const bIn = new Promise<void>((resolve) => (bStarted = resolve));
      const aTaken = new Promise((resolve) => a.on('acquired', resolve));
      const aRun = a.run(job, () => bIn);
      await aTaken;
      await sleep(1_100);
      let bRelease!: () => void;
      const bRun = b.run(
        { ...job, lockAtMostFor: '10s' },
        () =>
          new Promise<void>((resolve) => {
            bRelease = resolve;
            bStarted();
          }),
      );
      // A B that is refused ends A's job too, for the assertions below to say so.
      void bRun.then(bStarted);
      expect((await aRun).executed).toBe(true);
      expect(bRelease).toBeTypeOf('function');
      expect(aLogger.warnings.join('\n')).toMatch(/outlived its lock/);
      // A's late release matched nothing: B still holds the lock, so a third contender is skipped.
      expect(await c.run(job, () => 'c')).toEqual({ executed: false, reason: 'locked' });
      bRelease();
      expect((await bRun).executed).toBe(true);
      expect((await c.run(job, () => 'c')).executed).toBe(true);
    });

    it('stores names byte-exact and keeps names that differ only by case or trailing space apart', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const names = ['job', 'Job', 'job ', `quote ' "double" \\ back`, 'emoji 🦀 ✓ 漢字', 'é'.repeat(255), '🦀'.repeat(255)];
      for (const name of names) {
        expect((await guard.run({ name, lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => name)).executed).toBe(true);
      }
      const raw = await openRaw(target.name, url);
      try {
        const column = target.name === 'mysql' ? 'CONVERT(name USING utf8mb4)' : 'name';
        const rows = await raw.query<{ name: string }>(`SELECT ${column} AS name FROM ${prefix}locks`);
        expect(rows.map((row) => row.name).sort()).toEqual([...names].sort());
      } finally {
        await raw.close();
      }
    });

    it('skips with a TABLE_MISSING error, not an exception, before migrate()', async () => {
      const { guard, logger } = guardOn((await migratedGuard(target)).url, 'never_migrated_');
      const result = await guard.run({ name: 'x', lockAtMostFor: '1m' }, () => 'ran');
      expect(result.executed).toBe(false);
      if (result.executed || result.reason !== 'error') throw new Error('expected an error skip');
      expect(result.error).toBeInstanceOf(GuardError);
      expect(result.error.code).toBe('TABLE_MISSING');
      expect(result.error.cause).toBeDefined();
      expect(logger.errors.join('\n')).toMatch(/migrate/);
    });

    it('skips every run after close()', async () => {
      const { guard } = await migratedGuard(target);
      await guard.close();
      const result = await guard.run({ name: 'closed', lockAtMostFor: '1m' }, () => 'ran');
      expect(result).toMatchObject({ executed: false, reason: 'error', error: { code: 'GUARD_CLOSED' } });
    });

    it('emits a skipped event with reason "error" for a run after close()', async () => {
      const { guard } = await migratedGuard(target);
      const skips: { job: string; slot: Date | null; reason: string; error?: GuardError }[] = [];
      guard.on('skipped', (event) => skips.push(event));
      await guard.close();
      const slot = new Date('2026-01-01T00:00:00Z');
      const result = await guard.run({ name: 'closed', lockAtMostFor: '1m', slot }, () => 'ran');
      expect(result).toMatchObject({ executed: false, reason: 'error' });
      expect(skips).toHaveLength(1);
      expect(skips[0]).toMatchObject({ job: 'closed', slot, reason: 'error', error: { code: 'GUARD_CLOSED' } });
      if (!result.executed && result.reason === 'error') expect(skips[0]?.error).toBe(result.error);
    });

    it.skipIf(target.name === 'sqlite')('skips with ACQUIRE_FAILED when the database is unreachable (fail closed)', async () => {
      const unreachable = target.name === 'postgres' ? 'postgres://postgres@127.0.0.1:1/none' : 'mysql://root@127.0.0.1:1/none';
      const { guard, logger } = guardOn(unreachable, 'cronguard_');
      let ran = false;
      const result = await guard.run({ name: 'down', lockAtMostFor: '1m' }, () => (ran = true));
      expect(ran).toBe(false);
      expect(result).toMatchObject({
        executed: false,
        reason: 'error',
        error: { code: 'ACQUIRE_FAILED', job: 'down' },
      });
      if (result.executed || result.reason !== 'error') throw new Error('expected an error skip');
      expect(result.error.cause).toBeInstanceOf(Error);
      expect(logger.errors).toHaveLength(1);
      expect(logger.errors[0]).toMatch(/Taking the lock of job "down" failed, so the run was skipped/);
    });

    it.skipIf(target.name === 'sqlite')('skips with ACQUIRE_TIMEOUT when the acquire hangs, and gives back a lock won late', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { acquireTimeout: 300 });
      await guard.run({ name: 'hung', lockAtMostFor: '1m' }, () => 1);
      // Another session holds the (free) lock row, so the acquire's UPDATE waits for it.
      const raw = await holdLockRows(target, url, prefix);
      const started = performance.now();
      const result = await guard.run({ name: 'hung', lockAtMostFor: '1m' }, () => 'ran');
      const waited = performance.now() - started;
      await raw.exec('COMMIT');
      await raw.close();
      expect(result).toMatchObject({ executed: false, reason: 'error', error: { code: 'ACQUIRE_TIMEOUT' } });
      expect(waited).toBeGreaterThanOrEqual(290);
      expect(waited).toBeLessThan(2_000);
      // The acquire went through once the row was free: the guard gave that lock straight back.
      // On PostgreSQL the server cuts the take's wait at acquireTimeout too (test/shutdown.test.ts),
      // so it never wins late: the next run finds the lock free all the same.
      const other = guardOn(url, prefix).guard;
      await expect.poll(async () => (await other.run({ name: 'hung', lockAtMostFor: '1m' }, () => 'next')).executed).toBe(true);
      const statuses = (await other.history({ job: 'hung' })).runs.map((run) => [run.status, run.error]);
      if (target.name !== 'postgres') expect(statuses).toContainEqual(['failed', 'not run: the acquire answered after acquireTimeout']);
    });

    // PostgreSQL: the server cuts the take at acquireTimeout, and shutdown cancels one still
    // waiting (test/shutdown.test.ts), so no acquire outlives acquireTimeout there.
    it.skipIf(target.name !== 'mysql')(
      'waits at shutdown for an acquire that outlived acquireTimeout, and gives back its late win',
      async () => {
        const { guard, url, prefix } = await migratedGuard(target, { acquireTimeout: 300 });
        const job = { name: 'hung-at-shutdown', lockAtMostFor: '1m' };
        await guard.run(job, () => 1);
        const raw = await holdLockRows(target, url, prefix);
        expect(await guard.run(job, () => 'ran')).toMatchObject({
          executed: false,
          reason: 'error',
          error: { code: 'ACQUIRE_TIMEOUT' },
        });
        let closed = false;
        const closing = guard.shutdown({ timeout: '10s' }).then(() => void (closed = true));
        await sleep(300);
        // The acquire still waits for the row: shutdown waits for it rather than ending the pool under it.
        expect(closed).toBe(false);
        await raw.exec('COMMIT');
        await raw.close();
        await closing;
        const other = guardOn(url, prefix).guard;
        expect(await other.locks()).toEqual([expect.objectContaining({ name: job.name, state: 'free' })]);
        const statuses = (await other.history({ job: job.name })).runs.map((run) => [run.status, run.error]);
        expect(statuses[0]).toEqual(['failed', 'not run: the acquire answered after acquireTimeout']);
      },
    );

    it.skipIf(target.name === 'sqlite')(
      'keeps one acquire per job while it hangs, and sends one more after ten acquireTimeouts',
      async () => {
        // What hangs: on MariaDB the take waits for a row another session holds (its lock wait
        // timeout is whole seconds, far past acquireTimeout). On PostgreSQL the server would answer
        // that wait at acquireTimeout itself (lock_timeout), a race with the client's own timer on a
        // loaded machine: there the link to the server freezes instead, as a dead network does.
        const { guard: migrating, url, prefix } = await migratedGuard(target);
        const job = { name: 'one-at-a-time', lockAtMostFor: '1m' };
        await migrating.run(job, () => 1);
        const link = target.name === 'postgres' ? await frozenLink(url) : undefined;
        const { guard } = guardOn(link?.url ?? url, prefix, { acquireTimeout: 100 });
        // A connection through the link is open and the guard has read its tables before the hang.
        // The first run also opens that connection, which on a loaded machine can outlast the
        // 100 ms acquireTimeout (a skip, not a run): it is asked again until one run goes through.
        await expect
          .poll(async () => (await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 1)).executed, {
            timeout: 15_000,
            interval: 200,
          })
          .toBe(true);
        const raw = link === undefined ? await holdLockRows(target, url, prefix) : undefined;
        link?.freeze();
        try {
          const sent = performance.now();
          const message = async (): Promise<string> => {
            const result = await guard.run(job, () => 'ran');
            if (result.executed || result.reason !== 'error') throw new Error(`expected an error skip, got ${JSON.stringify(result)}`);
            expect(result.error.code).toBe('ACQUIRE_TIMEOUT');
            return result.error.message;
          };
          expect(await message()).toMatch(/took over 100 ms/);
          // The first acquire still waits: the next run sends nothing.
          expect(await message()).toMatch(/has still not answered/);
          // Ten acquireTimeouts on, it may never answer: one fresh acquire goes out.
          await sleep(sent + 1_050 - performance.now());
          expect(await message()).toMatch(/took over 100 ms/);
        } finally {
          link?.thaw();
          await raw?.exec('COMMIT');
          await raw?.close();
          await guard.close();
          await link?.close();
        }
      },
    );

    it.skipIf(target.name !== 'postgres')('puts its tables in the schema of a schema-qualified tablePrefix', async () => {
      const schema = `s${uniquePrefix()}`.slice(0, 30).replace(/_$/, '');
      const { guard, url } = guardOn((await migratedGuard(target)).url, `${schema}.jobs_`);
      await guard.migrate();
      expect((await guard.run({ name: 'in-schema', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
      const raw = await openRaw('postgres', url);
      try {
        const rows = await raw.query(`SELECT name FROM ${schema}.jobs_locks`);
        expect(rows).toEqual([{ name: 'in-schema' }]);
      } finally {
        await raw.close();
      }
    });

    it('runs each scheduled slot at most once, even after the lock is released, and says slot-done', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const late = guardOn(url, prefix).guard;
      const slot = new Date('2026-11-29T08:00:00.000Z');
      const next = new Date('2026-11-29T08:00:01.000Z');
      const job = { name: 'every-second', lockAtMostFor: '1m', lockAtLeastFor: 0 };
      expect(await guard.run({ ...job, slot }, () => 'first')).toEqual({ executed: true, value: 'first' });
      // The lock is free again (lockAtLeastFor 0), but a replica whose timer fired late must not run the slot.
      expect(await late.run({ ...job, slot }, () => 'again')).toEqual({ executed: false, reason: 'slot-done' });
      expect(await late.run({ ...job, slot: new Date(slot.getTime() - 1_000) }, () => 'older')).toEqual({
        executed: false,
        reason: 'slot-done',
      });
      expect(await late.run({ ...job, slot: next }, () => 'next')).toEqual({ executed: true, value: 'next' });
      // An unscheduled call ignores the watermark and leaves it alone.
      expect(await guard.run(job, () => 'by hand')).toEqual({ executed: true, value: 'by hand' });
      expect(await guard.run({ ...job, slot: next }, () => 'again')).toEqual({ executed: false, reason: 'slot-done' });
      // A held lock is 'locked', whatever the slot.
      let release!: () => void;
      const holding = guard.run({ ...job, slot: new Date(next.getTime() + 1_000) }, () => new Promise<void>((r) => (release = r)));
      await expect.poll(() => release).toBeTypeOf('function');
      expect(await late.run({ ...job, slot: new Date(next.getTime() + 2_000) }, () => 'x')).toEqual({
        executed: false,
        reason: 'locked',
      });
      release();
      await holding;
      // Runs may start in the same millisecond, so compare the slots as a set.
      const slots = (await guard.history({ job: 'every-second' })).runs.map((run) => run.slot?.toISOString() ?? 'none');
      expect(slots.sort()).toEqual(['2026-11-29T08:00:00.000Z', '2026-11-29T08:00:01.000Z', '2026-11-29T08:00:02.000Z', 'none']);
      await expect(guard.run({ ...job, slot: new Date(Number.NaN) }, () => 1)).rejects.toThrow(
        'Expected `slot` of job "every-second" to be a valid Date, got Invalid Date',
      );
    });

    it('makes migrate() idempotent', async () => {
      const { guard } = await migratedGuard(target);
      await guard.migrate();
      await guard.migrate();
      expect((await guard.run({ name: 'after', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
    });
  });
});
