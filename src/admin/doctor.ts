import type { RunRecord } from './run-record.js';
import { resolveCronSlots } from '../core/cron-slots.js';
import type { DeclaredSchedule } from './job-schedules.js';
import type { JobLedger } from './slots.js';

/** What `cronguard doctor` found about one job. */
export interface JobDiagnosis {
  readonly job: string;
  /** Runs looked at: the newest, at most RUNS_PER_JOB. */
  readonly runs: number;
  readonly succeeded: number;
  readonly failed: number;
  /** Runs that stopped because their signal aborted (shutdown, deadline, lock lost): not failures. */
  readonly cancelled: number;
  readonly abandoned: number;
  readonly overran: number;
  /** `running` rows whose lock has expired: a crashed holder nobody has taken over from yet. */
  readonly stuck: number;
  readonly p50Ms: number | null;
  readonly p95Ms: number | null;
  readonly maxMs: number | null;
  /** The lockAtMostFor of the newest run. */
  readonly lockAtMostForMs: number | null;
  readonly suggestedLockAtMostForMs: number | null;
  /**
   * How far ahead of the database's clock the furthest slot of the last day ran (its slot time minus
   * its start on the database clock), when over a second: the clock of the replica that ran it is fast.
   */
  readonly slotAheadMs: number | null;
  /** From the slot ledger, for a job with a declared schedule: its slots of the last day no replica ran; null without one. */
  readonly missedLastDay: number | null;
  /** From the slot ledger: its slots of the last day whose run started late; null without a declared schedule. */
  readonly lateLastDay: number | null;
  readonly problems: string[];
  /**
   * What doctor explains that is no problem (no effect on its exit code): slots of the last day
   * that were overlapped, and what held the lock then (a manual trigger still running, or a run).
   */
  readonly notes: string[];
  /** Who took the job's lock last (`lockedBy`), and the cronguard version it recorded (null: before 0.2.0). */
  readonly lockedBy: string;
  readonly version: string | null;
}

/** What a job's runs alone say: a `JobDiagnosis` without its lock row's holder. */
export type RunsDiagnosis = Omit<JobDiagnosis, 'lockedBy' | 'version'>;

/** A slot that starts this much before its own time, on the database clock, means a fast replica clock. */
export const SLOT_AHEAD_TOLERANCE_MS = 1_000;

/**
 * How far back doctor looks for problems that happened (runs that overran, were abandoned, or ran
 * ahead of their slot): a problem fixed since is no longer one. The counts cover every run read.
 */
export const PROBLEM_WINDOW_MS = 24 * 3_600_000;

/** How many of a job's newest runs doctor reads. */
export const RUNS_PER_JOB = 1_000;

/**
 * The suggested lockAtMostFor: twice the longest run seen, at least 10 s, rounded up to 10 s
 * below a minute and to whole minutes above. Twice, because the longest run seen is not the
 * longest run possible, and the job's deadline signal fires a margin before lockAtMostFor.
 */
export function suggestLockAtMostFor(maxMs: number): number {
  const wanted = Math.max(2 * maxMs, 10_000);
  return wanted < 60_000 ? Math.ceil(wanted / 10_000) * 10_000 : Math.ceil(wanted / 60_000) * 60_000;
}

/** Diagnoses one job from its newest runs (newest first) and the database's clock. */
export function diagnoseJob(job: string, runs: readonly RunRecord[], now: Date): RunsDiagnosis {
  const finished = runs.filter((run) => run.durationMs !== null && run.status !== 'skipped');
  const durations = finished.map((run) => run.durationMs ?? 0).sort((a, b) => a - b);
  const count = (predicate: (run: RunRecord) => boolean): number => runs.filter(predicate).length;
  const maxMs = durations.at(-1) ?? null;
  const lockAtMostForMs = runs.find((run) => run.lockAtMostForMs !== null)?.lockAtMostForMs ?? null;
  // A run that started before its own slot time (on the database clock) ran on a replica whose
  // clock is ahead. Slots are deduplicated by the furthest slot that ran, so while that replica
  // runs it takes every slot, and if it stops the others skip slots until real time catches up.
  // Only the last day's runs: a clock fixed since then is no longer a problem.
  const real = runs.filter((run) => run.status !== 'skipped');
  const recent = (run: RunRecord | undefined): boolean => run !== undefined && now.getTime() - run.startedAt.getTime() < PROBLEM_WINDOW_MS;
  const lastDay = real.filter((run) => recent(run));
  const ahead = lastDay
    .filter((run) => run.slot !== null)
    .map((run) => ({ run, ms: (run.slot?.getTime() ?? 0) - run.startedAt.getTime() }))
    .reduce<{ run: RunRecord; ms: number } | undefined>(
      (furthest, entry) => (furthest === undefined || entry.ms > furthest.ms ? entry : furthest),
      undefined,
    );
  const diagnosis = {
    job,
    runs: real.length,
    succeeded: count((run) => run.status === 'succeeded'),
    failed: count((run) => run.status === 'failed'),
    cancelled: count((run) => run.status === 'cancelled'),
    abandoned: count((run) => run.status === 'abandoned'),
    overran: count((run) => run.overran),
    stuck: count((run) => run.status === 'running' && run.lockUntil !== null && run.lockUntil < now),
    p50Ms: percentile(durations, 0.5),
    p95Ms: percentile(durations, 0.95),
    maxMs,
    lockAtMostForMs,
    suggestedLockAtMostForMs: maxMs === null ? null : suggestLockAtMostFor(maxMs),
    slotAheadMs: ahead !== undefined && ahead.ms > SLOT_AHEAD_TOLERANCE_MS ? ahead.ms : null,
    missedLastDay: null,
    lateLastDay: null,
  };
  const problems: string[] = [];
  if (maxMs !== null && lockAtMostForMs !== null && maxMs > lockAtMostForMs / 2) {
    problems.push(`longest run (${maxMs} ms) passed half of lockAtMostFor (${lockAtMostForMs} ms)`);
  }
  // One overrun long ago must not fail a health check for as long as its row is kept.
  const overranLastDay = lastDay.filter((run) => run.overran).length;
  // A run is marked abandoned when the next one takes over (a day later for a daily job): recent
  // when that next run is.
  const abandonedLastDay = real.filter((run, index) => run.status === 'abandoned' && (recent(run) || recent(real[index - 1]))).length;
  if (overranLastDay > 0) problems.push(`in the last day ${overranLastDay} run(s) overran their lock`);
  if (abandonedLastDay > 0) problems.push(`in the last day ${abandonedLastDay} run(s) abandoned`);
  if (diagnosis.stuck > 0) problems.push(`${diagnosis.stuck} run(s) still 'running' after their lock expired`);
  if (ahead !== undefined && diagnosis.slotAheadMs !== null) {
    problems.push(
      `in the last day a slot ran ${Math.round(diagnosis.slotAheadMs / 1_000)} s before its time on the database clock: the clock of ${ahead.run.lockedBy} is fast, ` +
        'or it passed a future `slot` itself (a fast replica runs every slot, and if it stops the others skip slots until real time catches up; sync the clocks with NTP)',
    );
  }
  return { ...diagnosis, problems, notes: [] };
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], fraction: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? null;
}

/** What the slot ledger adds to a job's diagnosis. */
export interface LedgerDiagnosis {
  readonly missedLastDay: number;
  readonly lateLastDay: number;
  readonly problems: string[];
  /** What the ledger explains that is no fault: slots overlapped by a run still holding the lock. */
  readonly notes: string[];
}

/**
 * The ledger's problems of one scheduled job: slots missed or started late in the last day; a
 * lockAtLeastFor at or above the schedule's interval, which eats slots (every slot that comes while
 * it holds the lock is skipped, `overlapped`); a lockAtMostFor below the p99 duration of its runs.
 */
export function diagnoseLedger(
  schedule: DeclaredSchedule,
  ledger: JobLedger | undefined,
  runs: readonly RunRecord[],
  now: Date,
): LedgerDiagnosis {
  const problems: string[] = [];
  const missed = ledger?.counts.missed ?? 0;
  const late = ledger?.counts.late ?? 0;
  if (missed > 0) problems.push(`in the last day ${missed} slot(s) missed: no replica ran them (\`cronguard slots --job\` lists them)`);
  if (late > 0) problems.push(`in the last day ${late} slot(s) started late (more than a tenth of the interval after their slot)`);
  const intervalMs = shortestInterval(schedule, ledger, now);
  if (intervalMs !== undefined && schedule.lockAtLeastForMs >= intervalMs) {
    problems.push(
      `lockAtLeastFor (${schedule.lockAtLeastForMs} ms) is at or above the schedule's interval (${intervalMs} ms): the lock it keeps ` +
        'skips the next slot(s) (shown as overlapped); set it below the interval (with a slotted schedule, 0 is enough)',
    );
  }
  const durations = runs
    .filter((run) => run.status !== 'skipped' && run.durationMs !== null)
    .map((run) => run.durationMs ?? 0)
    .sort((a, b) => a - b);
  const p99 = durations.length === 0 ? undefined : durations[Math.min(durations.length - 1, Math.ceil(0.99 * durations.length) - 1)];
  if (p99 !== undefined && schedule.lockAtMostForMs < p99) {
    problems.push(
      `lockAtMostFor (${schedule.lockAtMostForMs} ms) is below the p99 duration of its runs (${p99} ms): they outlive their lock; ` +
        `raise it to ${suggestLockAtMostFor(durations.at(-1) ?? p99)} ms`,
    );
  }
  return { missedLastDay: missed, lateLastDay: late, problems, notes: overlapNotes(ledger) };
}

/** The shortest gap between two slots of the last day, or around now when the ledger has fewer than two. */
function shortestInterval(schedule: DeclaredSchedule, ledger: JobLedger | undefined, now: Date): number | undefined {
  const slots = ledger?.slots ?? [];
  let shortest = Number.POSITIVE_INFINITY;
  for (let index = 1; index < slots.length; index += 1) {
    shortest = Math.min(shortest, (slots[index]?.slot.getTime() ?? 0) - (slots[index - 1]?.slot.getTime() ?? 0));
  }
  if (Number.isFinite(shortest)) return shortest;
  try {
    const cron = resolveCronSlots(schedule.expression, schedule.timezone ?? undefined, schedule.name);
    if (cron === undefined) return undefined;
    const slot = cron.slotAt(now);
    return cron.fireAfter(slot).getTime() - slot.getTime();
  } catch {
    // A schedule some other version declared that this one cannot read: nothing to compare.
    return undefined;
  }
}

/**
 * What held the lock over the overlapped slots of the last day: a manual run (a trigger) still
 * running, or a run of an earlier slot. Said as what happened, never as a replica's fault.
 */
function overlapNotes(ledger: JobLedger | undefined): string[] {
  const overlapped = (ledger?.slots ?? []).filter((entry) => entry.outcome === 'overlapped');
  const byTrigger = overlapped.filter((entry) => (entry.heldBy?.triggeredBy ?? null) !== null);
  const byRun = overlapped.length - byTrigger.length;
  const notes: string[] = [];
  if (byTrigger.length > 0) {
    const who = [...new Set(byTrigger.map((entry) => entry.heldBy?.triggeredBy ?? ''))].join(', ');
    notes.push(
      `in the last day ${byTrigger.length} slot(s) overlapped: a manual run (triggered by ${who}) was still running and held the lock ` +
        'when they came, so the schedule skipped them (no replica was down)',
    );
  }
  if (byRun > 0) {
    notes.push(
      `in the last day ${byRun} slot(s) overlapped: the job was still running (or held by lockAtLeastFor) when they came, so the schedule skipped them`,
    );
  }
  return notes;
}
