import { spreadOffsetMs } from '../core/spread.js';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import { resolveCronSlots } from '../core/cron-slots.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { slotLedger, type LedgerSlot } from '../core/slot-ledger.js';
import { expectedSlotsInTurns } from '../core/slot-walk.js';
import { DASHBOARD_PAGE_JOBS } from './dashboard-jobs.js';
import type { ScheduleStore } from './job-schedules.js';
import { readPauseIntervalsOfJobs } from './pause-reads.js';
import { DECLARE_EVERY_MS, ledgerRunColumns, RETIRE_AFTER_MS, settledSlots, toLedgerRun, type LedgerRow } from './slots.js';

/** The newest slots of one scheduled job, as the dashboard's overview strip shows them. */
export interface RecentJobSlots {
  readonly expression: string;
  readonly timezone: string | null;
  /** The schedule's next fire after the database's now; null once the schedule is retired. */
  readonly next: Date | null;
  /** Oldest first, at most the number asked for. */
  readonly slots: readonly LedgerSlot[];
}

/** The newest slots of a page's scheduled jobs, and the database's clock they were read at. */
export interface RecentSlots {
  readonly jobs: ReadonlyMap<string, RecentJobSlots>;
  readonly now: Date;
}

/**
 * The ledger of a page of the overview (at most DASHBOARD_PAGE_JOBS jobs) in four queries: the
 * database's clock, the page's declared schedules, one read of the runs of their newest slots,
 * and one of their pauses (`guard.slots()` reads one job at a time, two queries per job).
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

  return async function recentSlots(names: readonly string[], perJob: number): Promise<RecentSlots> {
    if (names.length > DASHBOARD_PAGE_JOBS) throw new RangeError(`At most ${DASHBOARD_PAGE_JOBS} jobs per read, got ${names.length}`);
    const now = await databaseNow();
    const windows = [];
    for (const schedule of await schedules.listOf(names)) {
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
      const end = retired ? Math.min(now.getTime(), schedule.declaredAt.getTime() + DECLARE_EVERY_MS) : now.getTime();
      const to = new Date(Math.max(end, schedule.changedAt.getTime()));
      // The newest perJob + 1 fires: the walk costs about that many, whatever the schedule's age
      // (one more than shown, as the newest may not be settled yet).
      const expected = await expectedSlotsInTurns(cron, schedule.changedAt, to, perJob + 1);
      const first = expected.slots[0] ?? to;
      const before = new Date(first.getTime() - Math.max(schedule.lockAtMostForMs, schedule.lockAtLeastForMs));
      windows.push({ schedule, cron, retired, expected, before, to });
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
    for (const { schedule, cron, retired, expected } of windows) {
      const rows = (rowsByJob.get(schedule.name) ?? []).map(toLedgerRun);
      const offsetMs = spreadOffsetMs(schedule.name, schedule.spreadMs);
      const ledger = settledSlots(
        cron,
        slotLedger(expected.slots, expected.following, rows, schedule.lockAtLeastForMs, pauses.get(schedule.name), offsetMs),
        now,
        offsetMs,
      );
      jobs.set(schedule.name, {
        expression: schedule.expression,
        timezone: schedule.timezone,
        next: retired ? null : cron.fireAfter(now),
        slots: ledger.slice(-perJob),
      });
    }
    return { jobs, now };
  };
}
