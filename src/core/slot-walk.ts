import type { CronSlots } from './cron-slots.js';
import { expectedSlotSteps, MAX_LEDGER_SLOTS, type ExpectedSlots } from './slot-ledger.js';

/**
 * The longest a ledger walk keeps the event loop before giving it back, in ms. node-cron takes
 * 50 to 300 µs per fire, and a week of a `* * * * * *` job is 10,000 fires (the ledger's cap): in
 * one go, 0.5 to 3 s during which the process's own timers (its guarded jobs) wait.
 */
export const WALK_TURN_MS = 2;

/** Fires remembered per schedule: the newest of them are what every refresh of a page asks again. */
const REMEMBERED_FIRES = 4 * MAX_LEDGER_SLOTS;
/** Schedules whose fires are remembered (the most recently walked). */
const REMEMBERED_SCHEDULES = 64;

/**
 * Each schedule's answers of `fireAfter`, by whole second. A fire depends on nothing but the
 * expression, its time zone and the second asked after, so these are kept for every page and
 * every job on the same schedule: a page that refreshes walks again only the fires new since.
 */
const remembered = new Map<CronSlots, Map<number, number>>();

function rememberedFires(cron: CronSlots): Pick<CronSlots, 'fireAfter'> {
  let fires = remembered.get(cron);
  if (fires === undefined) {
    if (remembered.size >= REMEMBERED_SCHEDULES) {
      const oldest = remembered.keys().next();
      if (oldest.done !== true) remembered.delete(oldest.value);
    }
    fires = new Map();
  } else {
    remembered.delete(cron);
  }
  remembered.set(cron, fires);
  const known = fires;
  return {
    fireAfter(at: Date): Date {
      const second = Math.floor(at.getTime() / 1_000) * 1_000;
      let fire = known.get(second);
      if (fire === undefined) {
        fire = cron.fireAfter(new Date(second)).getTime();
        // Bounded: once full, the whole map starts again (a walk refills what it needs).
        if (known.size >= REMEMBERED_FIRES) known.clear();
        known.set(second, fire);
      }
      return new Date(fire);
    },
  };
}

/**
 * The walks of this process share one turn per pass of the event loop: at most WALK_TURN_MS of
 * walking (one fire more) between two passes, whatever the number of walks. Each walk giving the
 * loop back on its own (a `setImmediate` each) let ten job pages' walks run a turn each in the
 * same check phase, back to back: the figure 12 bench measured the loop held up to 260 ms, every
 * such stretch inside the walks' `processImmediate`. Walks that find the turn spent wait in line,
 * first come first served, one of them resumed per pass.
 */
const waitingWalks: (() => void)[] = [];
let turnOpen = false;
let turnStartedAt = 0;
let passScheduled = false;

/** Opens this pass's turn; it closes at the pass's check phase (or the next one, opened from there). */
function openTurn(): void {
  turnOpen = true;
  turnStartedAt = performance.now();
  setImmediate(() => {
    turnOpen = false;
  });
}

/** In the check phase: the next walk in line gets a new turn and resumes right after this callback. */
function passTurn(): void {
  passScheduled = false;
  const next = waitingWalks.shift();
  if (next === undefined) return;
  openTurn();
  next();
  if (waitingWalks.length > 0) schedulePass();
}

function schedulePass(): void {
  if (passScheduled) return;
  passScheduled = true;
  setImmediate(passTurn);
}

/** Whether a walk may compute a fire now: this pass's turn is open and not spent, or no turn was taken and no walk waits. */
function mayWalk(): boolean {
  if (!turnOpen) {
    if (waitingWalks.length > 0) return false;
    openTurn();
    return true;
  }
  return performance.now() - turnStartedAt < WALK_TURN_MS;
}

/** Resolves at this walk's turn: after the loop's timers and I/O, and after every walk waiting before it. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    waitingWalks.push(resolve);
    schedulePass();
  });
}

/**
 * `expectedSlots` in turns of at most about WALK_TURN_MS (one fire more), giving the event loop
 * back between them, with the schedule's fires remembered across calls. For the reads of a page
 * (the dashboard, `guard.slots()`): however long the range, and however many pages walk at once,
 * the process's timers wait one turn at most, and a refresh walks only the fires it has not seen.
 */
export async function expectedSlotsInTurns(cron: CronSlots, since: Date, until: Date, cap = MAX_LEDGER_SLOTS): Promise<ExpectedSlots> {
  const steps = expectedSlotSteps(rememberedFires(cron), since, until, cap);
  for (;;) {
    while (!mayWalk()) await nextTurn();
    const step = steps.next();
    if (step.done === true) return step.value;
  }
}

/**
 * Clean stops in the slot ledger (issue 35): when the last process that declared a job's schedule
 * stopped cleanly (its shutdown), the job has no slots from that stop until a process declares it
 * again. A process that died without a shutdown (kill -9, a crash) stopped nothing: its slots stay
 * expected, and are missed when no replica runs them.
 */

/** One process's declaration of one job's schedule, as `<prefix>declarations` keeps it. */
export interface Declaration {
  /** Its first declaration (the process started scheduling the job). */
  readonly startedAt: Date;
  /** Its last declaration (refreshed hourly while it runs). */
  readonly declaredAt: Date;
  /** When its shutdown stopped scheduling the job; null while it runs, or when it died. */
  readonly stoppedAt: Date | null;
}

/** A time no process declared the job after a clean stop: [from, until), until null while it lasts. */
export interface StopGap {
  readonly from: Date;
  readonly until: Date | null;
}

/**
 * The gaps `declarations` imply, oldest first. A clean stop opens a gap when no other process
 * declared the job at that instant; the gap ends at the next process's first declaration. A
 * process with no stop counts as declaring from its start until `declaredAt + deadAfterMs` (it
 * refreshes hourly: past that it died), so that a kill -9 never ends the expectation and a long
 * dead one does not hide the clean stops after it.
 */
export function stopGaps(declarations: readonly Declaration[], now: Date, deadAfterMs: number): StopGap[] {
  const endOf = (declaration: Declaration): number => {
    if (declaration.stoppedAt !== null) return declaration.stoppedAt.getTime();
    const deadAt = declaration.declaredAt.getTime() + deadAfterMs;
    return deadAt < now.getTime() ? deadAt : Number.POSITIVE_INFINITY;
  };
  const declaredAt = (at: number): boolean =>
    declarations.some((declaration) => declaration.startedAt.getTime() <= at && at < endOf(declaration));
  const gaps: StopGap[] = [];
  const stops = declarations
    .map((declaration) => declaration.stoppedAt?.getTime())
    .filter((at): at is number => at !== undefined)
    .sort((a, b) => a - b);
  for (const stop of stops) {
    if (declaredAt(stop)) continue;
    // Two processes stopping in the same gap: the first stop opened it.
    const last = gaps.at(-1);
    if (last !== undefined && (last.until === null || last.until.getTime() > stop)) continue;
    const next = declarations
      .map((declaration) => declaration.startedAt.getTime())
      .filter((at) => at > stop)
      .reduce((earliest, at) => Math.min(earliest, at), Number.POSITIVE_INFINITY);
    gaps.push({ from: new Date(stop), until: Number.isFinite(next) ? new Date(next) : null });
  }
  return gaps;
}

/** Whether `at` falls in one of `gaps`. */
export function inStopGap(gaps: readonly StopGap[], at: number): boolean {
  return gaps.some((gap) => gap.from.getTime() <= at && (gap.until === null || at < gap.until.getTime()));
}
