import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { runRecordColumns, toDate, toRunRecord, type RunRecord, type RunRow } from './run-record.js';

/** The newest runs of a page of jobs, read in one query, and the database's clock at that read. */
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

/** The reads of the web dashboard that `history()` does not answer: each one query, bounded by what a page shows. */
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
    /**
     * The newest runs of the jobs named (at most DASHBOARD_PAGE_JOBS: a page of the overview),
     * whatever the size of the history: each job's runs read backwards on the (job_name,
     * started_at, id) index and stopped after `perJob` (skips left out: with recordSkips every
     * losing replica writes one per tick, and they would crowd the runs out of the strip). One
     * statement, whose size never grows with the number of jobs in the tables.
     */
    async recentRuns(jobs: readonly string[], perJob: number): Promise<RecentRuns> {
      const runs = new Map<string, RunRecord[]>();
      if (jobs.length > DASHBOARD_PAGE_JOBS) throw new RangeError(`At most ${DASHBOARD_PAGE_JOBS} jobs per read, got ${jobs.length}`);
      if (jobs.length === 0) return { runs, now: undefined };
      const limit = Math.max(Math.trunc(perJob), 1);
      const newest = (job: RawBuilder<unknown>) => sql`SELECT * FROM ${table} r
        WHERE r.job_name = ${job} AND r.status <> 'skipped' ORDER BY r.started_at DESC, r.id DESC LIMIT ${limit}`;
      // PostgreSQL: the page's names as one array parameter, each joined LATERAL to its own
      // index read (the statement is the same text for 1 job or 50). MySQL (MariaDB has no
      // LATERAL) and SQLite: one index read per name, each with its own ORDER BY … LIMIT, joined
      // by UNION ALL; at most DASHBOARD_PAGE_JOBS of them. On MySQL each is a parenthesized query
      // of the union, which writes its rows straight into the union's one temporary table: as a
      // derived table each (SQLite's only way: it has no parenthesized query in a compound),
      // MariaDB materialized 50 temporary tables first, 4-5 times slower at 1,000,000 runs (figure
      // 12). The outer ORDER BY names the union's columns: on MySQL the select list's started_at
      // is formatted text.
      const perJobRuns =
        dialect.name === 'postgres'
          ? sql`SELECT recent.* FROM unnest(${[...jobs]}::text[]) AS page(name) CROSS JOIN LATERAL (${newest(sql`page.name`)}) AS recent`
          : dialect.name === 'mysql'
            ? sql.join(
                jobs.map((job) => sql`(${newest(sql`${job}`)})`),
                sql` UNION ALL `,
              )
            : sql.join(
                jobs.map((job, index) => sql`SELECT * FROM (${newest(sql`${job}`)}) AS ${sql.raw(`job_${index}`)}`),
                sql` UNION ALL `,
              );
      const { rows } = await sql<RunRow & { db_now: Date | string }>`SELECT ${columns}, ${databaseNow}
        FROM (${perJobRuns}) AS recent
        ORDER BY recent.job_name, recent.started_at DESC, recent.id DESC`.execute(db);
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

/**
 * The most jobs one dashboard read takes: a page of the overview. Every per-job read of the
 * overview binds at most this many names, so that no statement grows with the number of jobs.
 */
export const DASHBOARD_PAGE_JOBS = 50;

/** Which job names a page of the overview lists, in the database's name order. */
export interface JobNamesQuery {
  /** Only names after this one (the last name of the previous page). @default from the first */
  readonly after?: string | undefined;
  /** Only names containing this text (case as the column compares it). @default every name */
  readonly contains?: string | undefined;
  /** At most this many names (1 to DASHBOARD_PAGE_JOBS + 1). */
  readonly limit: number;
}

/**
 * The dashboard's list of jobs: every lock row and every declared schedule (a job that ever ran
 * has a lock row: its first run inserted it), a page at a time. Never the runs table, whose size
 * is the history's.
 */
export function createJobListReader(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  const jobs = sql.raw(quotedTable(tables, 'jobs', dialect.quote));
  const reads = dialect.reads;
  // A substring test that no value can turn into a pattern (LIKE would read % and _): each
  // dialect's own position function, the text bound as a parameter.
  const contains = (text: string): RawBuilder<unknown> =>
    dialect.name === 'postgres'
      ? sql`strpos(name, ${text}) > 0`
      : dialect.name === 'mysql'
        ? sql`LOCATE(${text}, name) > 0`
        : sql`instr(name, ${text}) > 0`;

  return async function jobNames(query: JobNamesQuery): Promise<string[]> {
    const limit = Math.min(Math.max(Math.trunc(query.limit), 1), DASHBOARD_PAGE_JOBS + 1);
    const conditions: RawBuilder<unknown>[] = [];
    if (query.after !== undefined) conditions.push(sql`name > ${query.after}`);
    if (query.contains !== undefined && query.contains !== '') conditions.push(contains(query.contains));
    const where = conditions.length === 0 ? sql`` : sql`WHERE ${sql.join(conditions, sql` AND `)}`;
    // Each table read on its primary key in name order and stopped after `limit` names (an
    // index-only range from `after`), then the two short lists merged: the page costs about
    // 2 × limit index entries whatever the number of jobs (a `contains` filter reads names until
    // it has found `limit`). Each side a derived table, so that its ORDER BY … LIMIT is its own
    // on every dialect; the outer ORDER BY names the derived column (on MySQL the select list's
    // alias is the converted text, whose order need not be the column's binary order).
    const side = (table: RawBuilder<unknown>, alias: string) =>
      sql`SELECT * FROM (SELECT name FROM ${table} ${where} ORDER BY name LIMIT ${limit}) AS ${sql.raw(alias)}`;
    const { rows } = await sql<{ job: string }>`SELECT ${sql.raw(reads.name('names.name'))} AS job
      FROM (${side(locks, 'from_locks')} UNION ${side(jobs, 'from_jobs')}) AS names ORDER BY names.name LIMIT ${limit}`.execute(db);
    return rows.map((row) => row.job);
  };
}
