import { spreadOffsetMs } from '../core/spread.js';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import { resolveCronSlots } from '../core/cron-slots.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { slotLedger, type LedgerSlot } from '../core/slot-ledger.js';
import { expectedSlotsInTurns, inStopGap, stopGaps, type Declaration } from '../core/slot-walk.js';
import { DASHBOARD_PAGE_JOBS } from './dashboard-reads.js';
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

  /** The page's jobs' declarations; none on tables before migration 007 (no declarations table), as slots.ts. */
  async function declarationsOf(names: readonly string[]): Promise<Map<string, Declaration[]>> {
    try {
      return await declarations.ofJobs(names);
    } catch (error) {
      if (dialect.isMissingTable(error)) return new Map();
      throw error;
    }
  }

  return async function recentSlots(names: readonly string[], perJob: number): Promise<RecentSlots> {
    if (names.length > DASHBOARD_PAGE_JOBS) throw new RangeError(`At most ${DASHBOARD_PAGE_JOBS} jobs per read, got ${names.length}`);
    const now = await databaseNow();
    const windows = [];
    const pageSchedules = await schedules.listOf(names);
    const declared = await declarationsOf(pageSchedules.map((schedule) => schedule.name));
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
