import { getTasks, type RunCoordinator, type ScheduledTask } from 'node-cron';
import type { JobFunction } from '../../core/execute.js';
import type { ResolvedJob } from '../../core/job-options.js';

/** What a coordinator's trigger watch needs from its guard. */
export interface CoordinatorTriggerHost {
  /** True once the guard is closed: the watch then ends. */
  readonly closed: () => boolean;
  /** Answers the job's "run now" requests on this replica with `fn` (the guard's trigger watch); returns the function that stops. */
  watchTriggers(job: ResolvedJob, fn: JobFunction<unknown>): () => void;
}

/** How often node-cron's task registry is read for tasks created since (in memory: no statement). */
const SCAN_MS = 1_000;
/** node-cron's `distributedLease` when the task sets none. */
const NODE_CRON_DEFAULT_LEASE_MS = 30_000;

/**
 * Makes the distributed node-cron tasks that `coordinator` serves answer "run now" requests: a
 * manual run calls the task's own function through node-cron's `task.execute()` (an `invoked`
 * execution, which node-cron runs without asking the coordinator), inside the guard's trigger run,
 * so the take that clears the request is the lock of the run, as for `guard.schedule`. node-cron
 * tells a coordinator only a task's name, at its first fire; so the tasks are found in node-cron's
 * registry (those whose coordinator is this one), read at once and then every second, and
 * a stopped or destroyed task stops answering when node-cron says so. `jobFor` is the coordinator's
 * own job for a task (undefined for a task it would not run).
 */
export function answerTriggersOfServedTasks(
  coordinator: RunCoordinator,
  host: CoordinatorTriggerHost,
  jobFor: (name: string, leaseMs: number) => ResolvedJob | undefined,
): void {
  const watched = new Map<ScheduledTask, () => void>();
  const heard = new WeakSet<ScheduledTask>();
  const scan = (): void => {
    if (host.closed()) {
      clearInterval(timer);
      for (const stop of watched.values()) stop();
      watched.clear();
      return;
    }
    const serving = new Set<ScheduledTask>();
    for (const task of getTasks().values()) {
      const fields = task as ServedTaskFields;
      if (coordinatorOf(fields) !== coordinator || !isScheduling(task)) continue;
      serving.add(task);
      if (watched.has(task)) continue;
      const job = jobFor(fields.name, leaseOf(fields));
      if (job === undefined) continue;
      watched.set(
        task,
        host.watchTriggers(job, () => task.execute()),
      );
      if (heard.has(task)) continue;
      heard.add(task);
      // Stopping or destroying a task ends its answers at once, and starting it again resumes them.
      task.on('task:stopped', scan);
      task.on('task:destroyed', scan);
      task.on('task:started', scan);
    }
    for (const [task, stop] of watched) {
      if (serving.has(task)) continue;
      stop();
      watched.delete(task);
    }
  };
  const timer = setInterval(scan, SCAN_MS);
  // The scan never keeps a process alive.
  timer.unref();
  // The tasks usually follow `setRunCoordinator(guard.coordinator())` in the same tick.
  setTimeout(scan, 0).unref();
}

/** What node-cron 4.6 keeps on a task beyond its typings: the coordinator and lease it resolved for a `distributed` task. */
interface ServedTaskFields {
  readonly name: string;
  /** A task run in this process. */
  readonly runner?: { readonly runCoordinator?: RunCoordinator; readonly coordinatorTtl?: number };
  /** A task run in a forked process. */
  readonly runCoordinator?: RunCoordinator;
  readonly options?: { readonly distributedLease?: number };
}

function coordinatorOf(task: ServedTaskFields): RunCoordinator | undefined {
  return task.runner?.runCoordinator ?? task.runCoordinator;
}

function leaseOf(task: ServedTaskFields): number {
  return task.runner?.coordinatorTtl ?? task.options?.distributedLease ?? NODE_CRON_DEFAULT_LEASE_MS;
}

/** Scheduled now: not stopped (a task made with `createTask` and not started yet is stopped too) nor destroyed. */
function isScheduling(task: ScheduledTask): boolean {
  const status = task.getStatus();
  return status !== 'stopped' && status !== 'destroyed';
}

/**
 * Runs `watch` while `task` is scheduled: from now if it is, again each time it is started, and
 * stops the watch when the task is stopped or destroyed (a `guard.schedule` task answers "run now"
 * requests as the coordinator's tasks do: only while it would run its slots).
 */
export function watchWhileScheduling(task: ScheduledTask, watch: () => () => void): void {
  let stop: (() => void) | undefined;
  const update = (): void => {
    if (isScheduling(task)) stop ??= watch();
    else {
      stop?.();
      stop = undefined;
    }
  };
  task.on('task:started', update);
  task.on('task:stopped', update);
  task.on('task:destroyed', update);
  update();
}
