// MySQL/MariaDB: two apps whose table prefixes differ only by case. Their tables are apart (table
// names are case-sensitive on Linux), and so must be their take procedures (routine names never
// are): cronguard 0.2.0 gave both one procedure, and the app that migrated second never ran a job.
import { describe, expect, it } from 'vitest';
import { GuardError } from '../src/index.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { startWorker, type Worker } from './support/processes.js';
import { openRaw } from './support/raw-database.js';

const mysql = dialectTargets().find((target) => target.name === 'mysql');
const takeProcedureOf = (prefix: string): string => takeProcedureName(resolveTableNames(prefix, mysqlDialect));
const RUN_FOR_MS = 7_000;

describe.skipIf(mysql?.serverUrl === null || mysql === undefined)('table prefixes that differ only by case on mysql', () => {
  const url = databaseUrl(mysql as NonNullable<typeof mysql>);

  it('name two take procedures', () => {
    const lower = uniquePrefix();
    expect(takeProcedureOf(lower).toLowerCase()).not.toBe(takeProcedureOf(lower.toUpperCase()).toLowerCase());
    expect(takeProcedureOf('cronguard_')).toBe('cronguard_take_locks_v1_e10dce7a');
  });

  it('two apps × two replica processes × three every-second jobs: every slot exactly once in each app’s own tables', async () => {
    const lower = uniquePrefix();
    const apps = [lower, lower.toUpperCase()];
    for (const prefix of apps) {
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      await guard.close();
    }
    const replicas: Worker<{ type: string; at?: number }>[] = apps.flatMap((prefix) =>
      [1, 2].map(() => startWorker<{ type: string; at?: number }>('case-prefix-replica.ts', [url, prefix, String(RUN_FOR_MS)])),
    );
    /** When the last replica had scheduled all three jobs. */
    let allScheduledAt = 0;
    try {
      await Promise.all(replicas.map((replica) => replica.next('ready')));
      const scheduled = replicas.map((replica) => replica.next<{ type: string; at: number }>('scheduled'));
      for (const replica of replicas) replica.send({ type: 'start' });
      allScheduledAt = Math.max(...(await Promise.all(scheduled)).map(({ at }) => at));
      await Promise.all(replicas.map((replica) => replica.next('exiting')));
      expect(await Promise.all(replicas.map((replica) => replica.exited))).toEqual([0, 0, 0, 0]);
    } finally {
      for (const replica of replicas) replica.child.kill();
    }
    const raw = await openRaw('mysql', url);
    try {
      for (const prefix of apps) {
        const rows = await raw.query<{ job_name: Uint8Array | string; slot: Date | string; n: number | string }>(
          `SELECT job_name, slot, COUNT(*) AS n FROM \`${prefix}runs\` WHERE slot IS NOT NULL GROUP BY job_name, slot ORDER BY job_name, slot`,
        );
        const secondsOf = (job: string): number[] =>
          rows.filter((row) => String(row.job_name) === job).map((row) => Math.round(new Date(row.slot).getTime() / 1000));
        for (const job of ['a', 'b', 'c']) {
          // Exactly once: no slot twice.
          expect(
            rows.filter((row) => String(row.job_name) === job && Number(row.n) !== 1),
            `${prefix} ${job}`,
          ).toEqual([]);
          expect(secondsOf(job).length, `${prefix} ${job}: ${secondsOf(job).join(',')}`).toBeGreaterThanOrEqual(4);
        }
        // Every slot of each tick: the three jobs of a second are taken together, so each ran in the
        // same seconds. A second missing from all three is a tick no replica fired (a machine stalled
        // past it: node-cron drops such a second in every replica); one missing from some is a job
        // its tick lost. Only the seconds that began once every replica had scheduled all three: a
        // second that began between two jobs' schedule() (a stall in that loop) is the first slot
        // of the jobs scheduled before it only.
        const settled = (seconds: number[]): number[] => seconds.filter((second) => second * 1000 > allScheduledAt);
        const ticks = settled([...new Set(['a', 'b', 'c'].flatMap(secondsOf))].sort((x, y) => x - y));
        expect(ticks.length, `${prefix}: ticks after ${new Date(allScheduledAt).toISOString()}`).toBeGreaterThanOrEqual(4);
        for (const job of ['a', 'b', 'c']) expect(settled(secondsOf(job)), `${prefix} ${job}`).toEqual(ticks);
      }
    } finally {
      await raw.close();
    }
  }, 60_000);

  it('migrate() refuses a procedure of its take procedure’s name (without case) that reads other tables, and says what to do', async () => {
    const prefix = uniquePrefix();
    const other = `${prefix.toUpperCase()}locks`;
    const raw = await openRaw('mysql', url);
    const { guard } = guardOn(url, prefix);
    try {
      // What another prefix's procedure of the same name (a hash collision) would be.
      await raw.exec(`CREATE PROCEDURE \`${takeProcedureOf(prefix).toUpperCase()}\`() SELECT COUNT(*) FROM \`${other}\``);
      const error = await guard.migrate().then(
        () => undefined,
        (rejected: unknown) => rejected,
      );
      expect(error).toBeInstanceOf(GuardError);
      expect((error as GuardError).code).toBe('MIGRATION_FAILED');
      expect((error as Error).message).toContain(`reads other tables`);
      expect((error as Error).message).toContain(`DROP PROCEDURE \`${takeProcedureOf(prefix).toUpperCase()}\``);
      await raw.exec(`DROP PROCEDURE \`${takeProcedureOf(prefix).toUpperCase()}\``);
      await guard.migrate();
      const own = await raw.query<{ name: string }>(
        `SELECT routine_name AS name FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?`,
        [takeProcedureOf(prefix)],
      );
      expect(own.map((row) => row.name)).toEqual([takeProcedureOf(prefix)]);
    } finally {
      await guard.close();
      await raw.close();
    }
  });
});
