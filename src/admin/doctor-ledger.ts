import { resolveCronSlots } from '../core/cron-slots.js';
import type { DeclaredSchedule } from './job-schedules.js';
import type { RunRecord } from './run-record.js';
import type { JobLedger } from './slots.js';
import { suggestLockAtMostFor } from './doctor.js';

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
