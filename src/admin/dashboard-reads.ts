import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { toDate, toRunRecord, type RunRecord, type RunRow } from './run-record.js';

/** Every job's newest runs, read in one query, and the database's clock at that read. */
export interface RecentRuns {
  /** Per job, newest first, at most `perJob` runs; `skipped` rows left out. */
  readonly runs: ReadonlyMap<string, RunRecord[]>;
  /** The database's clock; undefined when the table has no run. */
  readonly now: Date | undefined;
}

/** A run with what the slot ledger records on its row (migration 005). */
export interface RunDetail extends RunRecord {
  /** How many slots before this one no replica ran (set on the run after a gap); null when none was seen. */
  readonly missedSlots: number | null;
  /** The run was a catch-up of a missed slot (the `catchUp` option). */
  readonly catchUp: boolean;
}

/** The reads of the web dashboard that `history()` does not answer: whatever the number of jobs, one query each. */
export function createDashboardReader(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const table = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  const reads = dialect.reads;
  // The columns of history.ts, under the same aliases, so that toRunRecord reads them.
  const columns = sql.raw(
    [
      'id',
      `${reads.name('job_name')} AS job`,
      `${reads.time('slot')} AS slot`,
      'status',
      'locked_by',
      `${reads.time('started_at')} AS started_at`,
      `${reads.time('finished_at')} AS finished_at`,
      'duration_ms',
      'lock_at_most_for_ms',
      `${reads.time('lock_until')} AS lock_until`,
      'overran',
      'error',
    ].join(', '),
  );
  const databaseNow = sql.raw(`${reads.time(reads.now)} AS db_now`);

  return {
    async recentRuns(perJob: number): Promise<RecentRuns> {
      // One statement for every job (a page refresh must not cost a query per job): ROW_NUMBER over
      // each job's runs, newest first (PostgreSQL, MySQL 8.0, MariaDB 10.2 and SQLite 3.25 have it),
      // served by the (job_name, started_at, id) index. Skips are left out: with recordSkips every
      // losing replica writes one per tick, and they would crowd the runs out of the strip.
      const { rows } = await sql<RunRow & { db_now: Date | string }>`SELECT ${columns}, ${databaseNow}
        FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY job_name ORDER BY started_at DESC, id DESC) AS recency
              FROM ${table} WHERE status <> 'skipped') AS recent
        WHERE recency <= ${perJob}
        ORDER BY job_name, started_at DESC, id DESC`.execute(db);
      const runs = new Map<string, RunRecord[]>();
      for (const row of rows) {
        const run = toRunRecord(row);
        const list = runs.get(run.job);
        if (list === undefined) runs.set(run.job, [run]);
        else list.push(run);
      }
      const first = rows[0];
      return { runs, now: first === undefined ? undefined : toDate(first.db_now) };
    },

    /** One run by its id (the execution's token), or undefined. */
    async run(id: string): Promise<RunDetail | undefined> {
      // The id is the primary key: one row at most, bound as a parameter like every value here.
      const { rows } = await sql<RunRow & { missed_slots: number | string | null; catch_up: boolean | number | null }>`
        SELECT ${columns}, missed_slots, catch_up FROM ${table} WHERE id = ${id}`.execute(db);
      const row = rows[0];
      if (row === undefined) return undefined;
      return {
        ...toRunRecord(row),
        missedSlots: row.missed_slots === null ? null : Number(row.missed_slots),
        catchUp: Boolean(Number(row.catch_up ?? 0)),
      };
    },
  };
}
