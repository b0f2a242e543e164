import { createTask, type ScheduledTask, type TaskContext, type TaskOptions } from 'node-cron';
import type { CronSlots } from '../../core/cron-slots.js';

/** node-cron 4.6's matcher, as its task's runner asks it for the next fire (its heartbeat's timer). */
interface NodeCronMatcher {
  getNextMatch(date: Date): Date;
}

/**
 * A node-cron task whose heartbeat fires on the real instants of `cron` (zoned-fires.ts), started.
 * node-cron 4.6 maps the local wall clock to instants itself, and wrongly on DST nights: on a
 * fall-back night it skips the first occurrence of the repeated hour (a `* * * * *` job misses 60
 * real minutes, an hourly job one hour), and on a spring-forward night a time in the gap
 * (`30 2 * * *` in Europe/Berlin) never fires. Its runner (the timer, missed-fire tolerance, the
 * task's state and events) asks its matcher for every next fire: the task's matcher answers with
 * `cron.fireAfter` instead, before the task starts, so the task, its `getNextRun()` and the slot
 * each fire carries (`context.date`) agree with the slot ledger. On ordinary nights both answer
 * the same instants. node-cron's API surface is the task's own.
 */
export function scheduleOnZonedFires(cron: CronSlots, fn: (context: TaskContext) => unknown, options: TaskOptions): ScheduledTask {
  const task = createTask(cron.expression, fn, options);
  const matcher = (task as unknown as { timeMatcher?: Partial<NodeCronMatcher> }).timeMatcher;
  if (typeof matcher?.getNextMatch !== 'function') {
    void task.destroy();
    throw new Error('node-cron no longer exposes its time matcher: cronguard needs the node-cron version it pins');
  }
  // The task and its runner share this matcher: an own property answers for both.
  matcher.getNextMatch = (date: Date): Date => cron.fireAfter(date);
  void task.start();
  return task;
}
