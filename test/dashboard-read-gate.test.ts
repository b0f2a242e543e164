// The dashboard's reads never take the guard's whole connection pool: at most
// DASHBOARD_CONCURRENT_READS of them run at once (per guard, whatever the number of pages and
// handlers), so that a guarded job's acquire always finds a connection. Shown with the runs table
// locked by another session: every read of it hangs, holding its connection, and ten job pages
// loaded at once would otherwise take all four of a small pool's connections. A pool only exists
// on the servers (SQLite is one in-process connection), so PostgreSQL and MariaDB.
import { setTimeout as sleep } from 'node:timers/promises';
import { createPool as createMysqlPool } from 'mysql2';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { DASHBOARD_CONCURRENT_READS } from '../src/integrations/dashboard/read-gate.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { serve } from './support/dashboard.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { seededJob, seedHistory } from './support/history-seed.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';

const POOL_SIZE = 4;

/** The sessions waiting for the lock on the runs table: the dashboard's reads of it, each on a pool connection. */
async function blockedReads(raw: RawDatabase, dialect: string, runsTable: string): Promise<number> {
  const [row] =
    dialect === 'postgres'
      ? await raw.query<{ n: number | string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
          [`%${runsTable}%`],
        )
      : await raw.query<{ n: number | string }>(
          `SELECT COUNT(*) AS n FROM information_schema.processlist WHERE state LIKE 'Waiting for table metadata lock%' AND info LIKE ?`,
          [`%${runsTable}%`],
        );
  return Number(row?.n ?? 0);
}

describe.each(dialectTargets().filter((target) => target.name !== 'sqlite'))('dashboard reads on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    `ten job pages at once hold at most ${DASHBOARD_CONCURRENT_READS} of the guard's connections: its acquire still runs`,
    async () => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const runsTable = `${prefix}runs`;
      const pool =
        target.name === 'postgres'
          ? new pg.Pool({ connectionString: url, max: POOL_SIZE })
          : createMysqlPool({ uri: url, connectionLimit: POOL_SIZE });
      // Without history the guarded run touches only the lock row: the runs table's lock leaves it alone.
      const guard = createGuard({ database: pool, tablePrefix: prefix, telemetry: false, history: false });
      closeWhenTestEnds(async () => {
        await guard.close();
        await new Promise<void>((resolve) => void pool.end(() => resolve()));
      });
      await guard.migrate();
      const setup = await openRaw(target.name, url);
      await seedHistory(setup, target.name, prefix, { runs: 100, jobs: 10 });
      await setup.close();
      const base = await serve(guard.dashboard());
      // Warm: the pool's connections open, the guard's first acquire done.
      expect((await guard.run({ name: 'gate-probe', lockAtMostFor: '1m' }, () => 'ran')).executed).toBe(true);

      const locker = await openRaw(target.name, url);
      const watcher = await openRaw(target.name, url);
      closeWhenTestEnds(async () => {
        await locker.close().catch(() => undefined);
        await watcher.close();
      });
      if (target.name === 'postgres') {
        await locker.exec('BEGIN');
        await locker.exec(`LOCK TABLE "${runsTable}" IN ACCESS EXCLUSIVE MODE`);
      } else {
        await locker.exec(`LOCK TABLES \`${runsTable}\` WRITE`);
      }
      const pages = Array.from({ length: 10 }, (_, k) =>
        fetch(`${base}/job?name=${seededJob(k)}&range=7d`).then((response) => response.status),
      );
      try {
        // The pages' reads of the runs table pile up behind the lock, up to the gate's limit.
        const deadline = Date.now() + 30_000;
        while ((await blockedReads(watcher, target.name, runsTable)) < DASHBOARD_CONCURRENT_READS && Date.now() < deadline)
          await sleep(100);
        expect(await blockedReads(watcher, target.name, runsTable)).toBe(DASHBOARD_CONCURRENT_READS);
        // A guarded run now: it needs a connection of the pool, which the pages left it.
        const run = guard.run({ name: 'gate-probe', lockAtMostFor: '1m' }, () => 'ran');
        const outcome = await Promise.race([run, sleep(20_000).then(() => 'no connection in 20 s' as const)]);
        expect(outcome === 'no connection in 20 s' ? outcome : outcome.executed).toBe(true);
        // Still no more reads than the limit: the others wait in the dashboard's line, not on the pool.
        expect(await blockedReads(watcher, target.name, runsTable)).toBe(DASHBOARD_CONCURRENT_READS);
      } finally {
        await locker.exec(target.name === 'postgres' ? 'COMMIT' : 'UNLOCK TABLES');
      }
      // Then every page loads.
      expect(await Promise.all(pages)).toEqual(Array.from({ length: 10 }, () => 200));
    },
    90_000,
  );
});
