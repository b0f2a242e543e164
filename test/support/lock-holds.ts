// Why a replica's take of a slot was refused, from what the replicas report: each replica reports
// its runs, its holds of the job's lock (test/fixtures/lock-hold-reports.ts, the Nest app's and the
// upgrade replica's own) and when each refused take was sent. A refusal is explained when another
// slot's hold overlapped its take: the server decided between the send and the answer, and the lock
// was held from the holder's send to its release's answer. On a stalled machine either end may come
// late, which a fixed tolerance around the body's times did not cover.

/** One hold of the lock by a replica (epoch ms): from its take's send to its release's answer. */
export interface LockHold {
  readonly slot: string | null;
  readonly from: number;
  readonly until: number;
}

/** A refusal as the fixtures report it: `asked` when its take was sent (null: unknown), `at` when it came back. */
export interface ReportedRefusal {
  readonly slot: string | null;
  readonly reason: string;
  readonly asked: number | null;
  readonly at: number;
}

/** Whether a 'locked' refusal came while another slot's run held the lock. */
export function lockedByAHold(refusal: ReportedRefusal, holds: readonly LockHold[]): boolean {
  const sent = refusal.asked ?? refusal.at;
  return refusal.reason === 'locked' && holds.some((hold) => hold.slot !== refusal.slot && hold.from <= refusal.at && hold.until >= sent);
}

/** A run as the fixtures report it: its slot, when its body started, and (when known) ended. */
export interface ReportedRun {
  readonly slot: string | null;
  readonly start: number;
  readonly end?: number;
}

/**
 * Whether other slots' runs explain a refusal: 'locked' while another slot's run held the lock
 * (`lockedByAHold`), 'slot-done' once a later slot's run had started (its take moved the slot
 * watermark past this slot) before the refusal came back.
 */
export function explainedByOtherSlots(refusal: ReportedRefusal, holds: readonly LockHold[], runs: readonly ReportedRun[]): boolean {
  if (refusal.reason === 'slot-done') {
    return runs.some((run) => Date.parse(run.slot ?? '') > Date.parse(refusal.slot ?? '') && run.start <= refusal.at);
  }
  return lockedByAHold(refusal, holds);
}

/**
 * Whether a slot nobody ran was refused where it was fired, and other slots' runs explain each of
 * its refusals (`explainedByOtherSlots`): fired late or while the lock was held, not lost.
 */
export function everyRefusalExplained(
  slot: string,
  refusals: readonly ReportedRefusal[],
  holds: readonly LockHold[],
  runs: readonly ReportedRun[],
): boolean {
  const ofSlot = refusals.filter((refusal) => refusal.slot === slot);
  return ofSlot.length > 0 && ofSlot.every((refusal) => explainedByOtherSlots(refusal, holds, runs));
}

/** The runs whose hold of the lock no replica reported: the rules above rest on them, so a test expects none. */
export function runsWithoutHold(runs: readonly ReportedRun[], holds: readonly LockHold[]): ReportedRun[] {
  return runs.filter(
    (run) => !holds.some((hold) => hold.slot === run.slot && hold.from <= run.start && hold.until >= (run.end ?? run.start)),
  );
}
