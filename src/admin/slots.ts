import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import { resolveCronSlots, type CronSlots } from '../core/cron-slots.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import type { DurationInput } from '../core/duration.js';
import { validateJobName } from '../core/job-options.js';
import {
  lateAfterMs,
  MAX_LEDGER_SLOTS,
  slotLedger,
  summarizeLedger,
  type LedgerRun,
  type LedgerSlot,
  type SlotOutcome,
} from '../core/slot-ledger.js';
import { expectedSlotsInTurns, inStopGap, stopGaps, type StopGap } from '../core/slot-walk.js';
import { spreadOffsetMs } from '../core/spread.js';
import { createDeclarationStore } from './declarations.js';
import { pointInTime } from './history.js';
import { readPauseIntervals } from './controls.js';
import type { DeclaredSchedule, ScheduleStore } from './job-schedules.js';
import { toDate } from './run-record.js';

/** Which slots `guard.slots()` accounts for. */
export interface SlotsQuery {
  /** Only this job. @default every job with a declared schedule */
  job?: string;
  /** From this time, or this long ago ('24h'). @default '24h' */
  since?: Date | DurationInput;
  /** Up to this time, or this long ago. @default now (the database's clock) */
  until?: Date | DurationInput;
}

/** The ledger of one job: one outcome per slot its schedule implies in the range. */
export interface JobLedger {
  readonly job: string;
  readonly expression: string;
  readonly timezone: string | null;
  /** No replica has declared the schedule for a day: its slots stop an hour after the last declaration. */
  readonly retired: boolean;
  /**
   * When the last replica that declared the schedule stopped cleanly (its `shutdown()`/`close()`),
   * when none has declared it since: no slot is expected after it. Null while a replica schedules
   * the job, or when the last one died without a shutdown (its slots stay expected, and missed).
   */
  readonly stoppedAt: Date | null;
  /**
   * The range the slots cover: the query's, cut to when the schedule last changed and to now
   * (slots younger than lateAfter are listed only once a run has started them).
   */
  readonly since: Date;
  readonly until: Date;
  /**
   * The range held more than 10,000 slots, or more history rows than one read takes (200,000):
   * only the newest are listed (and counted).
   */
  readonly truncated: boolean;
  /**
   * Why this job's ledger could not be computed, with the fix (its declared zone or expression is
   * one this reader cannot use); its slots are then empty. Absent when it was.
   */
  readonly problem?: string;
  readonly slots: LedgerSlot[];
  /** How many slots had each outcome. */
  readonly counts: Record<SlotOutcome, number>;
}

/** The most history rows one ledger read takes per job: 20 per slot (a run, and skips with recordSkips). */
const MAX_LEDGER_ROWS = MAX_LEDGER_SLOTS * 20;

/** A schedule no replica has declared for this long is retired. */
export const RETIRE_AFTER_MS = 24 * 3_600_000;
/** How often a replica that schedules a job declares it again. */
export const DECLARE_EVERY_MS = 3_600_000;
/** A replica that has not declared for this long (and did not stop cleanly) died: it no longer declares. */
export const DECLARER_DEAD_AFTER_MS = 2 * DECLARE_EVERY_MS;

/** A runs row as the ledger reads it, with the columns of `ledgerRunColumns`. */
export interface LedgerRow {
  id: string;
  slot: Date | string | null;
  status: string;
  started_at: Date | string;
  finished_at: Date | string | null;
  lock_until: Date | string | null;
  catch_up: boolean | number;
  triggered_by: string | null;
}

/** The columns the ledger reads from the runs table, times as the dialect reads them back. */
export function ledgerRunColumns(reads: Dialect['reads']): string {
  return [
    'id',
    `${reads.time('slot')} AS slot`,
    'status',
    `${reads.time('started_at')} AS started_at`,
    `${reads.time('finished_at')} AS finished_at`,
    `${reads.time('lock_until')} AS lock_until`,
    'catch_up',
    // Migration 004's column: the ledger needs 005, so it is there.
    'triggered_by',
  ].join(', ');
}

export function toLedgerRun(row: LedgerRow): LedgerRun {
  return {
    id: row.id,
    slot: row.slot === null ? null : toDate(row.slot),
    status: row.status,
    startedAt: toDate(row.started_at),
    finishedAt: row.finished_at === null ? null : toDate(row.finished_at),
    lockUntil: row.lock_until === null ? null : toDate(row.lock_until),
    catchUp: Boolean(Number(row.catch_up)),
    triggeredBy: row.triggered_by,
  };
}

/**
 * Which of a ledger's slots are settled: a slot nobody has run yet is not missed (nor overlapped)
 * until lateAfter (after the job's `spread` offset) has passed, so such newest slots are left
 * out; those that ran are listed.
 */
export function settledSlots(cron: CronSlots, ledger: LedgerSlot[], now: Date, spreadOffsetMs = 0): LedgerSlot[] {
  const next = cron.fireAfter(cron.slotAt(now));
  const settled = now.getTime() - lateAfterMs(next.getTime() - cron.slotAt(now).getTime(), spreadOffsetMs);
  return ledger.filter((entry) => entry.runId !== null || entry.slot.getTime() <= settled);
}

/**
 * One job's runs without a slot (manual triggers, calls by hand) that started in [from, to): a slot
 * that came while one held the lock was overlapped, not missed. On the (job_name, started_at)
 * index, a range of it; at most MAX_LEDGER_ROWS, the newest, as the slot read.
 */
export async function readUnslottedRuns(
  db: Kysely<unknown>,
  dialect: Dialect,
  tables: TableNames,
  job: string,
  from: Date,
  to: Date,
): Promise<LedgerRun[]> {
  const reads = dialect.reads;
  const { rows } =
    await sql<LedgerRow>`SELECT ${sql.raw(ledgerRunColumns(reads))} FROM ${sql.raw(quotedTable(tables, 'runs', dialect.quote))}
    WHERE job_name = ${job} AND started_at >= ${reads.timeParameter(from)} AND started_at < ${reads.timeParameter(to)}
      AND slot IS NULL
    ORDER BY started_at DESC LIMIT ${MAX_LEDGER_ROWS}`.execute(db);
  return rows.map(toLedgerRun);
}

/** The ledger of a job whose declared schedule this reader cannot use: no slots, and the problem. */
function unreadable(schedule: DeclaredSchedule, now: Date, error: unknown): JobLedger {
  const problem =
    `${error instanceof Error ? error.message : String(error)}, declared by ${schedule.declaredBy}: ` +
    `give the job a \`timezone\` (an IANA name), or start its replicas with TZ set to one; it is declared again within the hour`;
  return {
    job: schedule.name,
    expression: schedule.expression,
    timezone: schedule.timezone,
    retired: false,
    stoppedAt: null,
    since: now,
    until: now,
    truncated: false,
    problem,
    slots: [],
    counts: summarizeLedger([]),
  };
}

/** Reads ledgers: the declared schedules, then per job one range read of its runs by slot. */
export function createSlotsReader(
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

  /** A job's clean-stop gaps; none on tables before migration 007 (no declarations table). */
  async function gapsOf(job: string, now: Date): Promise<StopGap[]> {
    return stopGaps(await declarations.of(job), now, DECLARER_DEAD_AFTER_MS);
  }

  /**
   * One job's rows by slot, on the (job_name, slot) index. From one lockAtMostFor (or
   * lockAtLeastFor) before the range, so that a run of an earlier slot still holding the lock at
   * the first slot is seen. Bounded: a row per slot, more only with recordSkips (one per replica).
   * Newest first (the index read backwards), so that a range holding more rows than the bound
   * keeps its newest, as the walk keeps its newest slots: the oldest would have shown the newest
   * slots, which ran, as missed. Ascending again for the ledger. `completeAfter`: when the bound
   * cut the read, the oldest slot read (its rows may be cut too): only later slots are complete.
   */
  async function rowsFor(schedule: DeclaredSchedule, from: Date, to: Date): Promise<{ runs: LedgerRun[]; completeAfter: Date | null }> {
    const before = new Date(from.getTime() - Math.max(schedule.lockAtMostForMs, schedule.lockAtLeastForMs));
    const { rows } = await sql<LedgerRow>`SELECT ${columns} FROM ${runs}
      WHERE job_name = ${schedule.name} AND slot >= ${reads.timeParameter(before)} AND slot < ${reads.timeParameter(to)}
      ORDER BY slot DESC LIMIT ${MAX_LEDGER_ROWS}`.execute(db);
    const read = rows.map(toLedgerRun).reverse();
    return {
      runs: [...read, ...(await readUnslottedRuns(db, dialect, tables, schedule.name, before, to))],
      completeAfter: rows.length < MAX_LEDGER_ROWS ? null : (read[0]?.slot ?? null),
    };
  }

  return async function slots(query: SlotsQuery = {}): Promise<JobLedger[]> {
    const job = query.job === undefined ? undefined : validateJobName(query.job);
    const now = await databaseNow();
    // Durations count back from the database's clock, as the history's do from this replica's.
    const skew = now.getTime() - Date.now();
    const at = (value: Date | DurationInput, option: string): Date =>
      value instanceof Date ? pointInTime(value, option) : new Date(pointInTime(value, option).getTime() + skew);
    const since = at(query.since ?? '24h', 'since');
    const until = query.until === undefined ? now : at(query.until, 'until');
    const ledgers: JobLedger[] = [];
    for (const schedule of await schedules.list(job)) {
      let cron: CronSlots | undefined;
      try {
        cron = resolveCronSlots(schedule.expression, schedule.timezone ?? undefined, schedule.name);
      } catch (error) {
        // A stored schedule this reader cannot use (a zone it does not know): that job's problem, listed with the fix.
        ledgers.push(unreadable(schedule, now, error));
        continue;
      }
      if (cron === undefined) continue;
      const retired = now.getTime() - schedule.declaredAt.getTime() > RETIRE_AFTER_MS;
      const from = new Date(Math.max(since.getTime(), schedule.changedAt.getTime()));
      // The clean stops of the job's last declaring replica: no slot expected from one until a replica declares it again.
      const gaps = await gapsOf(schedule.name, now);
      const stoppedAt = gaps.at(-1)?.until === null ? (gaps.at(-1)?.from ?? null) : null;
      const end = Math.min(
        until.getTime(),
        now.getTime(),
        retired ? schedule.declaredAt.getTime() + DECLARE_EVERY_MS : Number.POSITIVE_INFINITY,
        stoppedAt?.getTime() ?? Number.POSITIVE_INFINITY,
      );
      const to = new Date(Math.max(end, from.getTime()));
      // In turns that give the event loop back (a week of an every-second job is 10,000 fires of
      // node-cron's matcher), the schedule's fires remembered for the next read.
      const walked = await expectedSlotsInTurns(cron, from, to);
      const read = await rowsFor(schedule, walked.slots[0] !== undefined && walked.truncated ? walked.slots[0] : from, to);
      // Rows past the read's bound: the ledger covers the slots whose rows were all read, the newest.
      const cut = read.completeAfter;
      const expected = cut === null ? walked : { ...walked, slots: walked.slots.filter((slot) => slot > cut), truncated: true };
      const covered = expected.slots[0] !== undefined && expected.truncated ? expected.slots[0] : from;
      const pauses = await readPauseIntervals(db, dialect, tables, schedule.name, covered, to);
      const offsetMs = spreadOffsetMs(schedule.name, schedule.spreadMs);
      const ledger = settledSlots(
        cron,
        slotLedger(expected.slots, expected.following, read.runs, schedule.lockAtLeastForMs, pauses, offsetMs),
        now,
        offsetMs,
      ).filter(
        // A slot in a stop gap was not expected; one that ran there anyway is listed.
        (entry) => entry.runId !== null || !inStopGap(gaps, entry.slot.getTime()),
      );
      ledgers.push({
        job: schedule.name,
        expression: schedule.expression,
        timezone: schedule.timezone,
        retired,
        stoppedAt,
        since: covered,
        until: to,
        truncated: expected.truncated,
        slots: ledger,
        counts: summarizeLedger(ledger),
      });
    }
    return ledgers;
  };
}
