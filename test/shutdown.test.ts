// Shutdown and close: bounded by their timeout whatever the database does, ending what the guard
// opened, and refusing every method afterwards with GUARD_CLOSED.
import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, PostgresDialect } from 'kysely';
import { createPool as createMysqlPool } from 'mysql2/promise';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { dialectTargets, type DialectTarget } from './support/dialects.js';
import { guardOn, migratedGuard, recordingLogger } from './support/guards.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';

/** Another session takes every lock row (SELECT … FOR UPDATE), so the guard's take on one waits. */
async function holdLockRows(target: DialectTarget, url: string, prefix: string): Promise<RawDatabase> {
  const raw = await openRaw(target.name, url);
  await raw.exec(target.name === 'postgres' ? 'BEGIN' : 'START TRANSACTION');
  await raw.query(`SELECT * FROM ${prefix}locks FOR UPDATE`);
  return raw;
}

/** Server processes waiting for a lock in a statement on the test's lock table (PostgreSQL). */
async function waitingOnLocks(monitor: RawDatabase, prefix: string): Promise<number> {
  const rows = await monitor.query<{ waiting: number }>(
    "SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position(? in query) > 0",
    [`${prefix}locks`],
  );
  return rows[0]?.waiting ?? -1;
}

describe.each(dialectTargets())('shutdown on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    // SQLite: an acquire's wait (the busy timeout) blocks the thread, so no shutdown can overlap
    // it, and it cannot outlive the process. PostgreSQL and MySQL: shutdown cancels the waiting
    // statement on the server (pg_cancel_backend, KILL QUERY) once its timeout has passed.
    const passedIn = target.name === 'postgres' ? 'a pg Pool passed in' : 'a mysql2 pool passed in';
    it.skipIf(target.name === 'sqlite').each(['a URL', passedIn])(
      'resolves within its timeout while an acquire waits on a row lock, and that acquire takes nothing (%s)',
      async (kind) => {
        const { url, prefix } = await migratedGuard(target);
        const pool =
          kind === 'a URL'
            ? undefined
            : target.name === 'postgres'
              ? new pg.Pool({ connectionString: url })
              : createMysqlPool({ uri: url, connectionLimit: 2 });
        const options = { acquireTimeout: '10s' };
        const guard =
          pool === undefined
            ? guardOn(url, prefix, options).guard
            : createGuard({ database: pool, tablePrefix: prefix, logger: recordingLogger(), ...options });
        const job = { name: 'waiting-at-shutdown', lockAtMostFor: '1m' };
        await guard.run(job, () => 1);
        const holder = await holdLockRows(target, url, prefix);
        let committed: Promise<void> | undefined;
        const commit = (): Promise<void> => (committed ??= holder.exec('COMMIT'));
        // Before the fix shutdown waited for this row: let go eventually, so that the test fails
        // rather than hangs.
        const letGo = setTimeout(() => void commit().catch(() => undefined), 8_000);
        try {
          let ran = false;
          const waiting = guard.run(job, () => void (ran = true));
          await sleep(500);
          const started = performance.now();
          await guard.shutdown({ timeout: '1s' });
          expect(performance.now() - started).toBeLessThan(1_000 + 3_000);
          await commit();
          expect(await waiting).toMatchObject({ executed: false, reason: 'error', error: { code: 'GUARD_CLOSED' } });
          // The row is free for the other replicas once the holder let go: the cut acquire took nothing.
          await sleep(300);
          expect(ran).toBe(false);
          const other = guardOn(url, prefix).guard;
          expect(await other.locks()).toEqual([expect.objectContaining({ name: job.name, state: 'free' })]);
          // A pool passed in stays the app's, and usable: the cut connection left it, nothing else.
          if (pool !== undefined) await expect((pool as { query(sql: string): Promise<unknown> }).query('SELECT 1')).resolves.toBeDefined();
        } finally {
          clearTimeout(letGo);
          await holder.close().catch(() => undefined);
          await pool?.end();
        }
      },
      20_000,
    );

    it.skipIf(target.name !== 'postgres').each(['a URL', 'a Kysely instance'])(
      'cuts a take waiting on a row lock at acquireTimeout on the server too, through %s',
      async (kind) => {
        const { url, prefix } = await migratedGuard(target);
        const kysely =
          kind === 'a URL'
            ? undefined
            : new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }) });
        const guard =
          kysely === undefined
            ? guardOn(url, prefix, { acquireTimeout: 500 }).guard
            : createGuard({ database: kysely, tablePrefix: prefix, acquireTimeout: 500, logger: recordingLogger() });
        const job = { name: 'bounded-take', lockAtMostFor: '1m' };
        expect((await guard.run(job, () => 1)).executed).toBe(true);
        const holder = await holdLockRows(target, url, prefix);
        const monitor = await openRaw('postgres', url);
        try {
          expect(await guard.run(job, () => 2)).toMatchObject({
            executed: false,
            reason: 'error',
            error: { code: 'ACQUIRE_TIMEOUT' },
          });
          // The holder still holds the row, and the take no longer waits for it on the server.
          await expect.poll(() => waitingOnLocks(monitor, prefix), { timeout: 3_000, interval: 100 }).toBe(0);
          await holder.exec('COMMIT');
          await sleep(300);
          const statuses = (await guard.history({ job: job.name })).runs.map((run) => run.status);
          expect(statuses).toEqual(['succeeded']);
        } finally {
          await holder.close().catch(() => undefined);
          await monitor.close();
          if (kysely !== undefined) {
            await guard.close();
            await kysely.destroy();
          }
        }
      },
    );

    it.skipIf(target.name !== 'postgres')('takes a lock with an acquireTimeout beyond the range of lock_timeout', async () => {
      const { guard } = await migratedGuard(target, { acquireTimeout: '30d' });
      expect(await guard.run({ name: 'long-bound', lockAtMostFor: '1m' }, () => 1)).toEqual({
        executed: true,
        value: 1,
      });
    });

    it.skipIf(target.name !== 'postgres')('close() ends the pool it opened even when no Kysely query ran on it', async () => {
      const { url, prefix } = await migratedGuard(target);
      const applicationName = `cg_close_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      const named = `${url}${url.includes('?') ? '&' : '?'}application_name=${applicationName}`;
      const { guard } = guardOn(named, prefix);
      expect((await guard.run({ name: 'once', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
      const monitor = await openRaw('postgres', url);
      const connections = async (): Promise<number> =>
        (
          await monitor.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ?', [
            applicationName,
          ])
        )[0]?.n ?? -1;
      try {
        expect(await connections()).toBeGreaterThan(0);
        await guard.close();
        await expect.poll(connections, { timeout: 5_000, interval: 100 }).toBe(0);
      } finally {
        await monitor.close();
      }
    });

    it('rejects every method that reads or writes the tables with GUARD_CLOSED after close()', async () => {
      const { guard } = await migratedGuard(target);
      await guard.close();
      const calls: Record<string, (guard: Guard) => Promise<unknown>> = {
        history: (g) => g.history(),
        locks: (g) => g.locks(),
        doctor: (g) => g.doctor(),
        prune: (g) => g.prune('1d'),
        unlock: (g) => g.unlock('some-job'),
        migrate: (g) => g.migrate(),
      };
      for (const [method, call] of Object.entries(calls)) {
        await expect(call(guard), method).rejects.toMatchObject({ name: 'GuardError', code: 'GUARD_CLOSED' });
      }
    });

    it('rejects a bad shutdown timeout through the promise it returns, and stays open', async () => {
      const { guard } = await migratedGuard(target);
      let returned: Promise<void> | undefined;
      expect(() => {
        returned = guard.shutdown({ timeout: 'soon' as never });
      }).not.toThrow();
      await expect(returned).rejects.toThrow(TypeError);
      expect((await guard.run({ name: 'after-bad-shutdown', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
    });
  });
});
