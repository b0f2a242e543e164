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
