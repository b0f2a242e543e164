import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { runRecordColumns, toDate, toRunRecord, type RunRecord, type RunRow } from './run-record.js';

/** Every job's newest runs, read in one query, and the database's clock at that read. */
export interface RecentRuns {
  /** Per job, newest first, at most `perJob` runs; `skipped` rows left out. */
  readonly runs: ReadonlyMap<string, RunRecord[]>;
  /** The database's clock; undefined when the table has no run. */
  readonly now: Date | undefined;
}

/** A run with what the slot ledger records on its row (migration 005), and the takeovers around it. */
export interface RunDetail extends RunRecord {
  /** How many slots before this one no replica ran (set on the run after a gap); null when none was seen. */
  readonly missedSlots: number | null;
  /** The run was a catch-up of a missed slot (the `catchUp` option). */
  readonly catchUp: boolean;
  /**
   * The job's run before this one, when this one took a lock that run never released (see
   * `tookOver`); null when this run took a free lock.
   */
  readonly tookOverFrom: RunRecord | null;
  /** The job's run after this one, when it took this run's lock before this run released it. */
  readonly takenOverBy: RunRecord | null;
}

/**
 * Whether `later`, the next run of the same job (skips left out), took the lock of `earlier`
 * without `earlier` releasing it. Runs of one job take one lock in turn, so the run after another
 * in started_at order is the one that took the lock after it. It took over when `earlier` was
 * `abandoned` (the takeover marks it so: its process died, or its lock expired while it ran), or
 * when `earlier` finished only after `later` started (it overran, and its release, which found the
 * lock taken, wrote `succeeded` or `failed` over `abandoned`), or had not finished at all. A run
 * that released finished before the next one could take the lock.
 */
export function tookOver(earlier: RunRecord, later: RunRecord): boolean {
  if (earlier.status === 'abandoned') return true;
  return earlier.finishedAt === null || earlier.finishedAt.getTime() > later.startedAt.getTime();
}

type DetailRow = RunRow & { missed_slots: number | string | null; catch_up: boolean | number | null; side: string };

/** The reads of the web dashboard that `history()` does not answer: whatever the number of jobs, one query each. */
export function createDashboardReader(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const table = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  const reads = dialect.reads;
  // The columns history() reads, under the same aliases, so that toRunRecord reads them. The
  // overview's strips show no trigger (and work on tables before migration 004); a run's page
  // reads migration 005's columns anyway, so 004's triggered_by is there too.
  const columns = sql.raw(runRecordColumns(reads, { triggeredBy: false }));
  const detailColumns = sql.raw(`${runRecordColumns(reads, { triggeredBy: true })}, missed_slots, catch_up`);
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

    /**
     * One run by its id (the execution's token), or undefined; with the run it took over from, or
     * that took over from it. Two queries.
     */
    async run(id: string): Promise<RunDetail | undefined> {
      // The run by its primary key: one row at most.
      const { rows: found } = await sql<DetailRow>`SELECT ${detailColumns}, 'run' AS side FROM ${table} WHERE id = ${id}`.execute(db);
      const row = found[0];
      if (row === undefined) return undefined;
      const run = toRunRecord(row);
      // Then, in one statement, the job's runs just before and just after it (skips left out),
      // each a derived table read backwards or forwards on the (job_name, started_at, id) index and
      // stopped at its first row. The job name is bound, so that PostgreSQL plans with its value
      // (an unknown one, from a subquery, had it walk the started_at index past other jobs' runs);
      // the run's start comes from a scalar subquery on the primary key, so that it is compared at
      // the column's own precision (PostgreSQL keeps microseconds, a Date only milliseconds).
      // Columns qualified with `r.`: MySQL's ORDER BY would otherwise take the select list's
      // started_at (formatted text) and sort instead of reading the index in order.
      const startedAt = sql`(SELECT this_run.started_at FROM ${table} this_run WHERE this_run.id = ${id})`;
      const neighbour = (side: 'previous' | 'next') => {
        const [before, order] = side === 'previous' ? [sql.raw('<'), sql.raw('DESC')] : [sql.raw('>'), sql.raw('ASC')];
        return sql`SELECT * FROM (SELECT ${detailColumns}, ${sql.raw(`'${side}'`)} AS side FROM ${table} r
          WHERE r.job_name = ${run.job} AND r.status <> 'skipped'
            AND r.started_at ${before}= ${startedAt} AND (r.started_at ${before} ${startedAt} OR r.id ${before} ${id})
          ORDER BY r.started_at ${order}, r.id ${order} LIMIT 1) AS ${sql.raw(`${side}_run`)}`;
      };
      const { rows } = await sql<DetailRow>`${neighbour('previous')} UNION ALL ${neighbour('next')}`.execute(db);
      const previous = rows.find((candidate) => candidate.side === 'previous');
      const next = rows.find((candidate) => candidate.side === 'next');
      const earlier = previous === undefined ? null : toRunRecord(previous);
      const later = next === undefined ? null : toRunRecord(next);
      return {
        ...run,
        missedSlots: row.missed_slots === null ? null : Number(row.missed_slots),
        catchUp: Boolean(Number(row.catch_up ?? 0)),
        tookOverFrom: earlier !== null && tookOver(earlier, run) ? earlier : null,
        takenOverBy: later !== null && tookOver(run, later) ? later : null,
      };
    },
  };
}
