import { randomUUID } from 'node:crypto';
import { createTask, type ScheduledTask, type TaskContext } from 'node-cron';
import type { CronSlots } from '../../core/cron-slots.js';
import { noteFireStep } from '../../core/fire-timeline.js';

/** node-cron 4.6's matcher, as its task and runner ask it for the next fire. */
interface NodeCronMatcher {
  getNextMatch(date: Date): Date;
}

/** An execution as node-cron 4.6's runner hands it to its hooks. */
interface NodeCronExecution {
  id: string;
  reason: 'scheduled';
  startedAt?: Date;
  finishedAt?: Date;
  result?: unknown;
  error?: unknown;
}

/**
 * The parts of node-cron 4.6's `Runner` (an inline task's `runner`) the heartbeat takes over: its
 * hooks (the task's state and events), and the fields its `stop()`, `isStarted()` and
 * `setUnref()` read.
 */
interface NodeCronRunner {
  running: boolean;
  heartBeatTimeout: NodeJS.Timeout | undefined;
  unref: boolean;
  runCount: number;
  missedExecutionTolerance: number;
  start(): void;
  beforeRun(date: Date, execution: NodeCronExecution): boolean | Promise<boolean>;
  onMatch(date: Date, execution: NodeCronExecution): unknown;
  onFinished(date: Date, execution: NodeCronExecution): unknown;
  onError(date: Date, error: unknown, execution: NodeCronExecution): void;
  onMissedExecution(date: Date): unknown;
  onErrorFallback(date: Date, error: unknown): void;
}

/** node-cron's longest timer: a fire further away is waited for in steps of this. */
const MAX_DELAY_MS = 86_400_000;

/** The whole second now falls in (UTC): node-cron's `nowWithoutMs` sets the milliseconds in local time instead, see below. */
const nowSecond = (): number => Math.floor(Date.now() / 1_000) * 1_000;

/**
 * A node-cron task whose heartbeat fires on the real instants of `cron` (zoned-fires.ts), started.
 *
 * node-cron 4.6 is wrong on the DST nights of the zone it runs in, twice. Its matcher maps the
 * local wall clock to instants itself: on a fall-back night it skips the first occurrence of the
 * repeated hour, and on a spring-forward night a time in the gap (`30 2 * * *` in Europe/Berlin)
 * never fires. And its runner's heartbeat reads "now" with `date.setMilliseconds(0)`, in local
 * time: during the second occurrence of a repeated hour of the process's own zone (TZ), that
 * reads back one hour earlier, so the heartbeat finds its fire still ahead, re-arms a timer of
 * 0 ms, and spins without firing for the whole hour.
 *
 * So the task's matcher answers with `cron.fireAfter` (the task's `getNextRun()` and
 * `getNextRuns()` agree with the slot ledger), and the runner's `start` is this heartbeat: node-
 * cron's own, its "now" read in UTC, on the same hooks (the task's state, its `execution:*`
 * events, its missed-fire tolerance), so `stop()`, `start()`, `destroy()`, `getStatus()`,
 * `unref()` and `execute()` work as node-cron's. guard.schedule passes only `name` and `timezone`
 * (no overlap prevention, no jitter, no maxExecutions, no run coordinator: the guard is its own).
 * On ordinary nights the fires are node-cron's, at the same instants.
 */
export function scheduleOnZonedFires(
  cron: CronSlots,
  fn: (context: TaskContext) => unknown,
  options: { name: string; timezone?: string },
): ScheduledTask {
  const task = createTask(cron.expression, fn, options);
  const internals = task as unknown as { timeMatcher?: Partial<NodeCronMatcher>; runner?: Partial<NodeCronRunner> };
  const matcher = internals.timeMatcher;
  const runner = internals.runner;
  if (typeof matcher?.getNextMatch !== 'function' || typeof runner?.start !== 'function' || typeof runner.onMatch !== 'function') {
    void task.destroy();
    throw new Error('node-cron no longer exposes its time matcher and runner: cronguard needs the node-cron version it pins');
  }
  // The task and its runner share this matcher: an own property answers for both.
  matcher.getNextMatch = (date: Date): Date => cron.fireAfter(date);
  const heartbeat = runner as NodeCronRunner;
  heartbeat.start = () => startHeartbeat(heartbeat, cron, options.name);
  void task.start();
  return task;
}

/** node-cron 4.6's `Runner.start`, for a task without overlap prevention, jitter, maxExecutions or coordinator; "now" in UTC. */
function startHeartbeat(runner: NodeCronRunner, cron: CronSlots, name: string): void {
  runner.running = true;
  let expected = cron.fireAfter(new Date(nowSecond())).getTime();
  const arm = (): void => {
    if (!runner.running) return;
    clearTimeout(runner.heartBeatTimeout);
    runner.heartBeatTimeout = setTimeout(beat, Math.min(Math.max(0, expected - Date.now()), MAX_DELAY_MS));
    if (runner.unref) runner.heartBeatTimeout.unref();
  };
  const beat = (): void => {
    const now = nowSecond();
    // node-cron's planBeat: the fires since the last beat; the newest runs if it is within the
    // missed-fire tolerance (and before the fire after it), the others are missed.
    while (now >= expected) {
      const next = cron.fireAfter(new Date(expected)).getTime();
      const lateBy = now - expected;
      if (lateBy <= runner.missedExecutionTolerance && lateBy < next - expected) {
        noteFireStep('timer', name, expected);
        void runScheduled(runner, new Date(expected));
      } else {
        void runHook(() => runner.onMissedExecution(new Date(expected)), runner, new Date(expected));
      }
      expected = next;
    }
    arm();
  };
  arm();
}

/** One scheduled fire through the runner's hooks, as node-cron's `runTask` makes it. */
async function runScheduled(runner: NodeCronRunner, date: Date): Promise<void> {
  const execution: NodeCronExecution = { id: randomUUID(), reason: 'scheduled' };
  try {
    if (!(await runner.beforeRun(date, execution))) return;
  } catch (error) {
    runner.onError(date, error, execution);
    return;
  }
  try {
    runner.runCount += 1;
    execution.startedAt = new Date();
    execution.result = await runner.onMatch(date, execution);
    execution.finishedAt = new Date();
  } catch (error) {
    execution.finishedAt = new Date();
    execution.error = error;
    try {
      runner.onError(date, error, execution);
    } catch (hookError) {
      runner.onErrorFallback(date, hookError);
    }
    return;
  }
  await runHook(() => runner.onFinished(date, execution), runner, date);
}

async function runHook(hook: () => unknown, runner: NodeCronRunner, date: Date): Promise<void> {
  try {
    await hook();
  } catch (error) {
    runner.onErrorFallback(date, error);
  }
}
