import type { ScheduledTask } from 'node-cron';
import type { CronSlots } from '../../core/cron-slots.js';
import { spreadStartMs } from '../../core/spread.js';

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
