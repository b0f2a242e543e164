import type { CronSlots } from './cron-slots.js';

/**
 * What became of one expected slot, every outcome in the order a reader scans them (the CLI's count
 * columns, the keys of a ledger's `counts`). `late`: a run that succeeded, but started more than
 * lateAfter after its slot. `overlapped`: no run, because the lock was still held (the previous run,
 * or its lockAtLeastFor) when the slot came. `missed`: no replica ran it. `paused`: no run, because
 * the job was paused (by hand or by auto-pause) when the slot came.
 */
export const SLOT_OUTCOMES = ['succeeded', 'late', 'missed', 'overlapped', 'paused', 'failed', 'cancelled', 'running'] as const;

/** One of {@link SLOT_OUTCOMES}. */
export type SlotOutcome = (typeof SLOT_OUTCOMES)[number];

/** The outcomes of a slot no run took. */
export type UnrunOutcome = Extract<SlotOutcome, 'missed' | 'overlapped'>;

/**
 * A history row as the ledger reads it: a run or a recorded skip of a slotted execution, or a run
 * without a slot (a manual trigger, a call by hand) whose lock may have held a slot off.
 */
export interface LedgerRun {
  readonly id: string;
  /** Null for a run without a slot: it takes no slot, but a slot that came while it held the lock was overlapped. */
  readonly slot: Date | null;
  /** The history row's status: running, succeeded, failed, cancelled, abandoned or skipped. */
  readonly status: string;
  /** On the database's clock. */
  readonly startedAt: Date;
  readonly finishedAt: Date | null;
  /** When the run's lock expires (or expired): a `running` row holds the lock until then at most. */
  readonly lockUntil: Date | null;
  /** A run of a missed slot, made by the `catchUp` option. */
  readonly catchUp: boolean;
  /** Who asked for the run by hand (a trigger); null or absent for a scheduled run or a call. */
  readonly triggeredBy?: string | null;
}

/** A time the job was paused: from `from` (inclusive) to `until` (exclusive; null: still paused). */
export interface PauseInterval {
  readonly from: Date;
  readonly until: Date | null;
}

/** A pause change as the controls audit records it, oldest first. */
export interface PauseChangeRecord {
  readonly action: string;
  /** For a pause: when it lifts by itself (null: until resumed). */
  readonly until: Date | null;
  readonly at: Date;
}

/**
 * The pause intervals a job's audit implies: a `pause` or `auto-pause` starts one (replacing a pause
 * in force), which ends at its `until`, at a `resume`, or at the next pause, whichever comes first.
 * Other actions (`trigger`) change nothing. `changes` ascending by `at`.
 */
export function pauseIntervals(changes: readonly PauseChangeRecord[]): PauseInterval[] {
  const intervals: PauseInterval[] = [];
  let open: { from: Date; until: Date | null } | null = null;
  const close = (at: Date): void => {
    if (open === null) return;
    const end = open.until !== null && open.until < at ? open.until : at;
    if (end > open.from) intervals.push({ from: open.from, until: end });
    open = null;
  };
  for (const change of changes) {
    if (change.action === 'pause' || change.action === 'auto-pause') {
      close(change.at);
      open = { from: change.at, until: change.until };
    } else if (change.action === 'resume') {
      close(change.at);
    }
  }
  if (open !== null) intervals.push(open);
  return intervals;
}

function pausedAt(pauses: readonly PauseInterval[], at: number): boolean {
  return pauses.some((pause) => pause.from.getTime() <= at && (pause.until === null || at < pause.until.getTime()));
}

/** One expected slot and its outcome. */
export interface LedgerSlot {
  readonly slot: Date;
  readonly outcome: SlotOutcome;
  /** The run of this slot, when one ran. */
  readonly runId: string | null;
  /** From the slot to its run's start (database clock), when one ran. */
  readonly delayMs: number | null;
  /** The run was a catch-up of a missed slot. */
  readonly catchUp: boolean;
  /**
   * For an `overlapped` slot: the run whose lock was held when the slot came (an earlier slot's
   * run, or a run without a slot: a manual trigger, `triggeredBy` who asked). Absent when only a
   * recorded skip says so.
   */
  readonly heldBy?: { readonly runId: string; readonly triggeredBy: string | null };
}

/** The most slots one ledger read covers per job: a range holding more keeps its newest slots. */
export const MAX_LEDGER_SLOTS = 10_000;

/**
 * A run started more than this after its slot is late: a tenth of the interval, at least 1 s, at
 * most 1 min; after the job's `spread` offset (src/core/spread.ts), when it has one: a spread job
 * starts that long after its slot by design.
 */
export function lateAfterMs(intervalMs: number, spreadOffsetMs = 0): number {
  return spreadOffsetMs + Math.min(Math.max(intervalMs / 10, 1_000), 60_000);
}

/**
 * The fires of `cron` in [since, until), at most `cap`: when the range holds more, the newest. The
 * walk starts `cap` intervals (the schedule's first gap after `since`) before `until`, so its cost
 * is about `cap` fires whatever the range (a `* * * * * *` job over a week is 604,800 fires; the
 * ledger then covers its last 10,000 s). Also the fire after the last one (its interval decides the
 * last slot's lateAfter), and `truncated` when older fires were left out.
 */
export function expectedSlots(cron: Pick<CronSlots, 'fireAfter'>, since: Date, until: Date, cap = MAX_LEDGER_SLOTS): ExpectedSlots {
  const steps = expectedSlotSteps(cron, since, until, cap);
  for (;;) {
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/** The fires of a range, as `expectedSlots` gives them. */
export interface ExpectedSlots {
  readonly slots: Date[];
  readonly following: Date | null;
  readonly truncated: boolean;
}

/**
 * `expectedSlots`' walk, one step per fire: it pauses (yields) after each fire, so that a caller
 * may give the event loop back between steps (`expectedSlotsInTurns`); `expectedSlots` runs it
 * to its end at once.
 */
export function* expectedSlotSteps(
  cron: Pick<CronSlots, 'fireAfter'>,
  since: Date,
  until: Date,
  cap = MAX_LEDGER_SLOTS,
): Generator<void, ExpectedSlots, void> {
  // fireAfter looks strictly after the whole second it is given: from the second before `since`.
  const firstAfter = (at: number): Date => cron.fireAfter(new Date(Math.ceil(at / 1_000) * 1_000 - 1_000));
  const first = firstAfter(since.getTime());
  const intervalMs = Math.max(cron.fireAfter(first).getTime() - first.getTime(), 1_000);
  const start = Math.max(since.getTime(), until.getTime() - cap * intervalMs);
  let slots: Date[] = [];
  let fire = start === since.getTime() ? first : firstAfter(start);
  let truncated = start > since.getTime() && first < until;
  for (let walked = 0; fire < until; walked += 1) {
    if (walked >= 20 * cap) {
      // An irregular schedule denser near `until` than at `since`: keep walking from closer in.
      const closer = yield* expectedSlotSteps(cron, new Date(fire.getTime()), until, cap);
      return { ...closer, truncated: true };
    }
    slots.push(fire);
    fire = cron.fireAfter(fire);
    yield;
  }
  if (slots.length > cap) {
    slots = slots.slice(-cap);
    truncated = true;
  }
  return { slots, following: fire, truncated };
}

/**
 * The ledger of one job: for each expected slot (ascending, as `expectedSlots` gives them) exactly
 * one outcome, from the job's history rows with a slot. A pure function: the same schedule and
 * history give the same ledger on every replica.
 *
 * - A run with the slot gives its status: running, failed (also `abandoned`), cancelled, or
 *   succeeded, which is `late` when it started more than lateAfter after the slot.
 * - Without one, the slot is `overlapped` when a run of an earlier slot still held the lock at the
 *   slot's time (running, or finished after it, or within its lockAtLeastFor), or a run without a
 *   slot held it then (a manual trigger from its start to its end; another call within its
 *   lockAtLeastFor too), or when a skip was recorded for it (`recordSkips`), unless it fell in one
 *   of `pauses` (`paused`); else `missed`.
 * - `spreadOffsetMs`: the job's `spread` offset; its runs start that long after their slot, and
 *   are late only past it (the delay stays from the slot: the history's start less the slot).
 */
export function slotLedger(
  slots: readonly Date[],
  following: Date | null,
  runs: readonly LedgerRun[],
  lockAtLeastForMs: number,
  pauses: readonly PauseInterval[] = [],
  spreadOffsetMs = 0,
): LedgerSlot[] {
  const bySlot = new Map<number, LedgerRun>();
  const skipped = new Set<number>();
  const held: (LedgerRun & { slot: Date })[] = [];
  const unslotted: LedgerRun[] = [];
  for (const run of runs) {
    if (run.slot === null) {
      if (run.status !== 'skipped') unslotted.push(run);
      continue;
    }
    const at = run.slot.getTime();
    if (run.status === 'skipped') {
      skipped.add(at);
      continue;
    }
    held.push({ ...run, slot: run.slot });
    const known = bySlot.get(at);
    // One run per slot is the guard's promise; should a row be doubled (a slot given by hand), the first counts.
    if (known === undefined || run.startedAt < known.startedAt) bySlot.set(at, run);
  }
  held.sort((a, b) => a.slot.getTime() - b.slot.getTime());
  const ledger: LedgerSlot[] = [];
  // A sweep over the runs in slot order: the latest moment the lock was held by a run of an earlier slot, and that run.
  let next = 0;
  let heldUntil = Number.NEGATIVE_INFINITY;
  let holder: LedgerRun | undefined;
  for (let index = 0; index < slots.length; index += 1) {
    const slot = slots[index] as Date;
    const at = slot.getTime();
    while (next < held.length && (held[next] as LedgerRun & { slot: Date }).slot.getTime() < at) {
      const run = held[next] as LedgerRun;
      const released = lockReleasedAt(run, lockAtLeastForMs);
      if (released > heldUntil) {
        heldUntil = released;
        holder = run;
      }
      next += 1;
    }
    const run = bySlot.get(at);
    if (run !== undefined) {
      const after = slots[index + 1] ?? following;
      const intervalMs = after === null ? 60_000 : after.getTime() - at;
      const delayMs = run.startedAt.getTime() - at;
      ledger.push({
        slot,
        outcome: runOutcome(run, delayMs > lateAfterMs(intervalMs, spreadOffsetMs)),
        runId: run.id,
        delayMs,
        catchUp: run.catchUp,
      });
      continue;
    }
    // A run without a slot holding the lock when the slot came (its start at or before it, its release after it).
    const manual = unslotted.find(
      (candidate) =>
        candidate.startedAt.getTime() <= at &&
        lockReleasedAt(candidate, (candidate.triggeredBy ?? null) !== null ? 0 : lockAtLeastForMs) > at,
    );
    const by = manual ?? (heldUntil > at ? holder : undefined);
    // A pause comes first: while paused, a recorded skip (reason 'paused') is no overlap.
    const outcome = pausedAt(pauses, at) ? 'paused' : by !== undefined || skipped.has(at) ? 'overlapped' : 'missed';
    const entry: LedgerSlot = { slot, outcome, runId: null, delayMs: null, catchUp: false };
    ledger.push(
      outcome === 'overlapped' && by !== undefined ? { ...entry, heldBy: { runId: by.id, triggeredBy: by.triggeredBy ?? null } } : entry,
    );
  }
  return ledger;
}

function runOutcome(run: LedgerRun, late: boolean): SlotOutcome {
  switch (run.status) {
    case 'running':
      return 'running';
    case 'cancelled':
      return 'cancelled';
    case 'succeeded':
      return late ? 'late' : 'succeeded';
    default:
      // failed, and abandoned (its holder died or overran: the slot's work did not finish).
      return 'failed';
  }
}

/** When a run gave its lock back: at its end, not before its lockAtLeastFor; while it runs, its lock's expiry. */
function lockReleasedAt(run: LedgerRun, lockAtLeastForMs: number): number {
  if (run.finishedAt === null) {
    const expiry = run.status === 'running' ? (run.lockUntil?.getTime() ?? Number.POSITIVE_INFINITY) : run.startedAt.getTime();
    return Math.max(expiry, run.startedAt.getTime() + lockAtLeastForMs);
  }
  return Math.max(run.finishedAt.getTime(), run.startedAt.getTime() + lockAtLeastForMs);
}

/** Counts by outcome: the ledger's summary. */
export function summarizeLedger(ledger: readonly LedgerSlot[]): Record<SlotOutcome, number> {
  const counts = Object.fromEntries(SLOT_OUTCOMES.map((outcome) => [outcome, 0])) as Record<SlotOutcome, number>;
  for (const entry of ledger) counts[entry.outcome] += 1;
  return counts;
}
