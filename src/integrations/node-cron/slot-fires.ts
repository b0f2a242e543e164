import type { ScheduledTask } from 'node-cron';
import type { CronSlots } from '../../core/cron-slots.js';
import { spreadStartMs } from '../../core/spread.js';

/** One `guard.schedule` task, as the fires of its slots see it. */
export interface ScheduledFire {
  /** The job's name: the key its acquire is sent under. */
  readonly name: string;
  readonly task: ScheduledTask;
  /** The slots of the task's expression, in its time zone. */
  readonly cron: CronSlots;
  /** One scheduled fire of the job for `slot` (the catch-up check, the run); never rejects. */
  fire(slot: Date): Promise<void>;
}

/** A task added to `SlotFires`: handed back to `fire` and `delete`. */
export interface SlotFireEntry {
  readonly scheduled: ScheduledFire;
  /** When the task last started (Date.now()): node-cron fires a started task from the next whole second on. */
  startedAt: number;
  /** The slot (ms) the task was last fired for, by its own timer or another task's. */
  firedSlot: number;
  /** That fire. */
  firing: Promise<void>;
  /** Whether that fire has ended (its run, or its skip). */
  settled: boolean;
}

/**
 * The `guard.schedule` tasks of one guard, fired together. node-cron gives every task its own
 * timer, so the N jobs due at one second fire one after another in the timers phase, each
 * reaching the database only at the end of that phase (which, beside the app's other timers, can
 * last tens of milliseconds). Instead, the first of them to fire a slot fires every task of the
 * guard due at that same slot at once (started before that second, not stopped, its expression
 * matching the slot, its previous fire ended), and announces their acquires to the runner, which sends them together
 * right away: their answers are on the way while node-cron runs the other timers, which then
 * find their slot already fired and return that fire.
 * A task stopped by another timer's callback in the very turn of its slot, after the first fire,
 * still runs that slot once, as one whose acquire was already sent when it was stopped does.
 */
export class SlotFires {
  readonly #entries = new Set<SlotFireEntry>();
  readonly #expectTogether: (names: readonly string[]) => void;

  constructor(expectTogether: (names: readonly string[]) => void) {
    this.#expectTogether = expectTogether;
  }

  /** Adds a task that has just been scheduled (and started). */
  add(scheduled: ScheduledFire): SlotFireEntry {
    const entry: SlotFireEntry = { scheduled, startedAt: Date.now(), firedSlot: Number.NaN, firing: Promise.resolve(), settled: true };
    this.#entries.add(entry);
    return entry;
  }

  /** The task was destroyed: it fires no more. */
  delete(entry: SlotFireEntry): void {
    this.#entries.delete(entry);
  }

  /**
   * node-cron fired `entry`'s task for `slot`: its fire, started now or by the first task due at
   * that slot. A timer late enough to come after the task was fired for a newer slot (a process
   * too busy for a whole second) returns that fire: its slot is older than the one the job has
   * taken, so the watermark would refuse it anyway, and firing it would fire the others backwards.
   */
  fire(entry: SlotFireEntry, slot: Date): Promise<void> {
    const at = slot.getTime();
    if (entry.firedSlot >= at) return entry.firing;
    const due = [entry];
    for (const other of this.#entries) if (other !== entry && !(other.firedSlot >= at) && isDueAt(other, at)) due.push(other);
    if (due.length > 1) this.#expectTogether(due.map(({ scheduled }) => scheduled.name));
    for (const one of due) {
      one.firedSlot = at;
      one.settled = false;
      const firing = one.scheduled.fire(new Date(at));
      one.firing = firing;
      void firing.then(() => {
        if (one.firing === firing) one.settled = true;
      });
    }
    return entry.firing;
  }
}

/**
 * Whether node-cron is about to fire the task for the slot at `at` (ms): it started before that
 * second, is not stopped, and its expression fires then; and whether it is free to be fired now:
 * its previous fire has ended. A task still busy with an older slot (its acquire still under way,
 * as when a busy process's timers run late) fires on its own timer, as it did without this: its
 * acquire for this slot, sent now, would be skipped as `locked` behind the one under way.
 */
function isDueAt({ scheduled, startedAt, settled }: SlotFireEntry, at: number): boolean {
  if (startedAt >= at || !settled) return false;
  const status = scheduled.task.getStatus();
  return (status === 'idle' || status === 'running') && scheduled.cron.fireAfter(new Date(at - 1_000)).getTime() === at;
}

/**
 * The fires of a job with `spread`: node-cron calls at the slot, and the fire waits until the
 * slot plus the job's offset (`spreadStartMs`), then fires for the nominal slot: the acquire
 * claims that slot, so every replica still races for the same one and it runs once.
 * Stopping or destroying the task (as shutdown does) cancels the waits: those slots are not run,
 * as a stopped task runs no slot, and no timer holds the process open. A wait that ends once the
 * guard is shutting down (`isClosed`), before shutdown has stopped the task, ends without a run
 * either: its acquire would only be refused, with a warning.
 */
export function spreadFires(
  task: ScheduledTask,
  cron: Pick<CronSlots, 'fireAfter'>,
  offsetMs: number,
  fire: (slot: Date) => Promise<void>,
  isClosed: () => boolean,
): (slot: Date) => Promise<void> {
  const waiting = new Set<() => void>();
  const cancelAll = (): void => {
    for (const cancel of [...waiting]) cancel();
  };
  task.on('task:stopped', cancelAll);
  task.on('task:destroyed', cancelAll);
  return (slot) => {
    const waitMs = spreadStartMs(cron, slot, offsetMs) - Date.now();
    if (waitMs <= 0) return fire(slot);
    return new Promise<void>((resolve) => {
      const cancel = (): void => {
        clearTimeout(timer);
        waiting.delete(cancel);
        resolve();
      };
      const timer = setTimeout(() => {
        waiting.delete(cancel);
        resolve(isClosed() ? undefined : fire(slot));
      }, waitMs);
      waiting.add(cancel);
    });
  };
}
