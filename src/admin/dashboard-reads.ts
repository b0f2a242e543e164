import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { runRecordColumns, toDate, toRunRecord, type RunRecord, type RunRow } from './run-record.js';
import { spreadOffsetMs } from '../core/spread.js';
import { resolveCronSlots } from '../core/cron-slots.js';
import { slotLedger, type LedgerSlot } from '../core/slot-ledger.js';
import { expectedSlotsInTurns, inStopGap, stopGaps } from '../core/slot-walk.js';
import { createDeclarationStore } from './declarations.js';
import type { ScheduleStore } from './job-schedules.js';
import { readPauseIntervalsOfJobs } from './controls.js';
import {
  DECLARE_EVERY_MS,
  DECLARER_DEAD_AFTER_MS,
  ledgerRunColumns,
  RETIRE_AFTER_MS,
  settledSlots,
  toLedgerRun,
  type LedgerRow,
} from './slots.js';

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

/** The newest slots of one scheduled job, as the dashboard's overview strip shows them. */
export interface RecentJobSlots {
  readonly expression: string;
  readonly timezone: string | null;
  /** The schedule's next fire after the database's now; null once the schedule is retired, or stopped. */
  readonly next: Date | null;
  /**
   * When the last replica that declared the schedule stopped cleanly, as `guard.slots()` says
   * (`stoppedAt`): no slot is expected after it. Null while a replica schedules the job.
   */
  readonly stoppedAt: Date | null;
  /** Oldest first, at most the number asked for. */
  readonly slots: readonly LedgerSlot[];
}

/** The newest slots of a page's scheduled jobs, and the database's clock they were read at. */
export interface RecentSlots {
  readonly jobs: ReadonlyMap<string, RecentJobSlots>;
  readonly now: Date;
}

/**
 * The ledger of a page of the overview (at most DASHBOARD_PAGE_JOBS jobs) in six queries: the
 * database's clock, the page's declared schedules, their declarations (clean stops), one read of
 * the runs of their newest slots, one of their runs without a slot (triggers) and one of their
 * pauses (`guard.slots()` reads one job at a time). The same ledger as `guard.slots()`: no slot
 * expected after a clean stop of the job's last replica, nor in a stop gap.
 */
export function createDashboardLedgerReader(
  db: Kysely<unknown>,
  dialect: Dialect,
  tables: TableNames,
  schedules: ScheduleStore,
  databaseNow: () => Promise<Date>,
) {
  const runs = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  const reads = dialect.reads;
  const columns = sql.raw(ledgerRunColumns(reads));
  const declarations = createDeclarationStore(db, dialect, tables);

  return async function recentSlots(names: readonly string[], perJob: number): Promise<RecentSlots> {
    if (names.length > DASHBOARD_PAGE_JOBS) throw new RangeError(`At most ${DASHBOARD_PAGE_JOBS} jobs per read, got ${names.length}`);
    const now = await databaseNow();
    const windows = [];
    const pageSchedules = await schedules.listOf(names);
    const declared = await declarations.ofJobs(pageSchedules.map((schedule) => schedule.name));
    for (const schedule of pageSchedules) {
      let cron;
      try {
        cron = resolveCronSlots(schedule.expression, schedule.timezone ?? undefined, schedule.name);
      } catch {
        // A schedule declared in a zone this reader cannot use: that job's problem (`cronguard slots`
        // lists it with the fix), never the overview's.
        continue;
      }
      if (cron === undefined) continue;
      const retired = now.getTime() - schedule.declaredAt.getTime() > RETIRE_AFTER_MS;
      // The clean stops of the job's last declaring replica, as guard.slots() reads them (stop-gaps.ts):
      // the strip ends at a stop that lasts, and leaves out the slots of an earlier stop.
      const gaps = stopGaps(declared.get(schedule.name) ?? [], now, DECLARER_DEAD_AFTER_MS);
      const stoppedAt = gaps.at(-1)?.until === null ? (gaps.at(-1)?.from ?? null) : null;
      const end = Math.min(
        now.getTime(),
        retired ? schedule.declaredAt.getTime() + DECLARE_EVERY_MS : Number.POSITIVE_INFINITY,
        stoppedAt?.getTime() ?? Number.POSITIVE_INFINITY,
      );
      const to = new Date(Math.max(end, schedule.changedAt.getTime()));
      // The newest perJob + 1 fires: the walk costs about that many, whatever the schedule's age
      // (one more than shown, as the newest may not be settled yet).
      const expected = await expectedSlotsInTurns(cron, schedule.changedAt, to, perJob + 1);
      const first = expected.slots[0] ?? to;
      const before = new Date(first.getTime() - Math.max(schedule.lockAtMostForMs, schedule.lockAtLeastForMs));
      windows.push({ schedule, cron, retired, gaps, stoppedAt, expected, before, to });
    }
    const rowsByJob = new Map<string, LedgerRow[]>();
    if (windows.length > 0) {
      // One statement for the page's jobs: an OR of (job_name, slot range) terms, each a range on
      // the (job_name, slot) index, bound as parameters; at most DASHBOARD_PAGE_JOBS terms, so
      // the statement never grows with the number of jobs in the tables (SQLite refuses an
      // expression tree deeper than 1,000). From one lock duration before each job's first slot,
      // so that a run of an earlier slot still holding the lock then is seen.
      const ranges = windows.map(
        ({ schedule, before, to }) =>
          sql`(job_name = ${schedule.name} AND slot >= ${reads.timeParameter(before)} AND slot < ${reads.timeParameter(to)})`,
      );
      const { rows } = await sql<LedgerRow & { job: string }>`SELECT ${columns}, ${sql.raw(reads.name('job_name'))} AS job
        FROM ${runs} WHERE ${sql.join(ranges as RawBuilder<unknown>[], sql` OR `)}
        ORDER BY job_name, slot`.execute(db);
      for (const row of rows) {
        const list = rowsByJob.get(row.job);
        if (list === undefined) rowsByJob.set(row.job, [row]);
        else list.push(row);
      }
      // The page's runs without a slot (manual triggers) that may have held a shown slot off: a slot
      // that came while one held the lock is overlapped, as guard.slots() says. One statement, an OR
      // of (job_name, started_at range) terms on the (job_name, started_at) index, as the one above.
      const starts = windows.map(
        ({ schedule, before, to }) =>
          sql`(job_name = ${schedule.name} AND started_at >= ${reads.timeParameter(before)} AND started_at < ${reads.timeParameter(to)} AND slot IS NULL)`,
      );
      const unslotted = await sql<LedgerRow & { job: string }>`SELECT ${columns}, ${sql.raw(reads.name('job_name'))} AS job
        FROM ${runs} WHERE ${sql.join(starts as RawBuilder<unknown>[], sql` OR `)}`.execute(db);
      for (const row of unslotted.rows) {
        const list = rowsByJob.get(row.job);
        if (list === undefined) rowsByJob.set(row.job, [row]);
        else list.push(row);
      }
    }
    // A slot that fell while its job was paused is `paused`, not missed, as guard.slots() says:
    // the pauses of every job's shown slots, from the controls audit, in one more statement.
    const pauses = await readPauseIntervalsOfJobs(
      db,
      dialect,
      tables,
      windows.map(({ schedule, expected, to }) => ({ job: schedule.name, from: expected.slots[0] ?? to, to })),
    );
    const jobs = new Map<string, RecentJobSlots>();
    for (const { schedule, cron, retired, gaps, stoppedAt, expected } of windows) {
      const rows = (rowsByJob.get(schedule.name) ?? []).map(toLedgerRun);
      const offsetMs = spreadOffsetMs(schedule.name, schedule.spreadMs);
      const ledger = settledSlots(
        cron,
        slotLedger(expected.slots, expected.following, rows, schedule.lockAtLeastForMs, pauses.get(schedule.name), offsetMs),
        now,
        offsetMs,
      ).filter(
        // A slot in a stop gap was not expected; one that ran there anyway is listed (as guard.slots()).
        (entry) => entry.runId !== null || !inStopGap(gaps, entry.slot.getTime()),
      );
      jobs.set(schedule.name, {
        expression: schedule.expression,
        timezone: schedule.timezone,
        stoppedAt,
        next: retired || stoppedAt !== null ? null : cron.fireAfter(now),
        slots: ledger.slice(-perJob),
      });
    }
    return { jobs, now };
  };
}
