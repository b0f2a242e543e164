import type { ScheduledTask } from 'node-cron';
import type { CronSlots } from '../../core/cron-slots.js';

/**
 * The fires of a job with `spread`: node-cron calls at the slot, and the fire waits until the
 * slot plus the job's offset (counted from the slot, not from node-cron's call, so that a late
 * timer does not push the start further), then fires for the nominal slot: the acquire claims
 * that slot, so every replica still races for the same one and it runs once. An offset as long as
 * the gap to the next slot (a schedule irregular past what `spread` was checked against, a DST
 * night) is cut to just before the next slot, so that the runs still follow their slots.
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
    const at = slot.getTime();
    const gapMs = cron.fireAfter(slot).getTime() - at;
    const waitMs = at + Math.min(offsetMs, Math.max(gapMs - 1, 0)) - Date.now();
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
