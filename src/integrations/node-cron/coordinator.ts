import { getTasks, type RunCoordinator, type ScheduledTask } from 'node-cron';
import type { SlotWatch } from '../../admin/slot-watch.js';
import { resolveCronSlots } from '../../core/cron-slots.js';
import type { DurationInput } from '../../core/duration.js';
import type { JobFunction } from '../../core/execute.js';
import { messageOf } from '../../core/errors.js';
import { isHeld, type HeldLock } from '../../core/held-lock.js';
import { SUCCEEDED_ENDING } from '../../core/run-result.js';
import { lockAtLeastForError, resolveDefaults, resolveJob, type ResolvedDefaults, type ResolvedJob } from '../../core/job-options.js';
import type { Logger } from '../../core/logger.js';
import type { LockTaker } from '../../core/runner.js';
import { MAX_TIMER_MS } from '../../core/timeout.js';

/** Lock durations for the tasks a node-cron coordinator serves. */
export interface CoordinatorOptions {
  /** The lockAtMostFor of every task. @default the guard's `defaults.lockAtMostFor`, else the task's `distributedLease` (node-cron's default: 30 s) */
  lockAtMostFor?: DurationInput;
  /** The lockAtLeastFor of every task. @default the guard's `defaults.lockAtLeastFor`, else 0 */
  lockAtLeastFor?: DurationInput;
}

/** What a coordinator needs from its guard. */
export interface CoordinatorHost {
  /** Takes the locks, and releases them through the `HeldLock` it returns (the guard's `Runner`). */
  readonly runner: LockTaker;
  readonly defaults: ResolvedDefaults;
  readonly logger: Logger;
  /** The slot ledger's live side, where each task's schedule is declared. */
  readonly slotWatch: SlotWatch;
  /**
   * Where the tasks it serves answer "run now" requests (the guard's trigger watch): answers the
   * job's requests on this replica with `fn`; returns the function that stops.
   */
  readonly watchTriggers: (job: ResolvedJob, fn: JobFunction<unknown>) => () => void;
}

/** node-cron's coordinator key: `${taskName}:${slot.toISOString()}`. */
const KEY = /^(.*):(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/;
/** node-cron names an unnamed task with a random UUID: a lock per replica, which guards nothing. */
const GENERATED_NAME = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * A node-cron (≥ 4.6) RunCoordinator backed by the guard: one lock per task **name** (not per
 * fire, so a 2.5 s job on a 1 s schedule never runs on two replicas at once), held by
 * lockAtMostFor/lockAtLeastFor, with the slot watermark (so a replica whose timer fires late never
 * runs a slot again after the first run released it). node-cron does not tell the coordinator
 * whether the task threw, so its runs are recorded `succeeded`; `guard.schedule` records outcomes.
 * It takes and releases through the runner (`take`, then `HeldLock.finish`): the same events,
 * metrics and history rows as the guard's other runs. The tasks it serves answer "run now"
 * requests (`answerTriggersOfServedTasks`, below).
 */
export function createRunCoordinator(host: CoordinatorHost, options: CoordinatorOptions = {}): RunCoordinator {
  // Checked now, so that a bad duration fails at start-up rather than at the first tick.
  const durations = coordinatorDurations(options, host.defaults);
  const held = new Map<string, HeldEntry>();
  const jobs = new Map<string, ResolvedJob>();
  const declared = new Set<string>();
  const warned = new Set<string>();
  const { runner } = host;

  /**
   * The task's job; undefined (logged once) when the task's lease cannot hold the coordinator's
   * lockAtLeastFor. Its schedule is declared the first time the task is seen (its first fire, or
   * the trigger watch finding it in node-cron's registry).
   */
  function jobFor(name: string, ttlMs: number): ResolvedJob | undefined {
    let job = jobs.get(name);
    if (job === undefined) {
      const lockAtMostForMs = durations.lockAtMostForMs ?? ttlMs;
      // Only a lockAtMostFor from the task's distributedLease can be too short here: coordinatorDurations checked the rest.
      const tooLong = lockAtLeastForError(
        { option: sourceOf(options, 'lockAtLeastFor'), ms: durations.lockAtLeastForMs },
        {
          option: durations.lockAtMostForMs === undefined ? 'distributedLease' : sourceOf(options, 'lockAtMostFor'),
          ms: lockAtMostForMs,
        },
        name,
      );
      if (tooLong !== undefined) {
        warnOnce(name, `Task "${name}" did not run: ${tooLong.message}`);
        return undefined;
      }
      job = resolveJob({ name }, { lockAtMostForMs, lockAtLeastForMs: durations.lockAtLeastForMs });
      jobs.set(name, job);
    }
    if (!declared.has(name)) {
      declared.add(name);
      declare(job);
    }
    return job;
  }

  /** Declares the task's schedule for the slot ledger, from node-cron's registry (the coordinator is told only its name). */
  function declare(job: ResolvedJob): void {
    const task = [...getTasks().values()].find((candidate) => candidate.name === job.name) as ScheduledTaskFields | undefined;
    const expression = task?.getPattern();
    if (expression === undefined) return;
    // node-cron accepted the expression already; one cronguard refuses (`*/61`, a step that never
    // repeats) runs on undeclared: the slot ledger cannot say which slots it should have had.
    let cron;
    try {
      cron = resolveCronSlots(expression, task?.timezone, job.name);
    } catch (error) {
      warnOnce(job.name, `Job "${job.name}" runs, but the slot ledger does not follow it: ${messageOf(error)}`);
      return;
    }
    if (cron !== undefined) host.slotWatch.declare({ ...job, cron, catchUpMs: null, spreadMs: null });
  }

  function warnOnce(name: string, message: string): void {
    if (warned.has(name)) return;
    warned.add(name);
    host.logger.error(message);
  }

  /** Takes the lock, and holds it for onComplete; false when this replica does not run the fire. */
  async function take(key: string, job: ResolvedJob, slot: Date | null): Promise<boolean> {
    // Won even if the guard began to shut down meanwhile: the slot is now marked as run, so giving
    // the lock back unrun would lose it on every replica. node-cron runs the task (shutdown does
    // not stop the user's own tasks), and shutdown waits for its onComplete, up to the lock's
    // expiry (the runner tracks the held lock until then).
    const result = await runner.take(job, { slot });
    if (!isHeld(result)) return false;
    const entry: HeldEntry = { lock: result, expiry: undefined };
    held.set(key, entry);
    // node-cron may never call onComplete (a task stopped during its random delay, a forked task
    // whose child died). The entry stays a while after the lock expired, so that a run that
    // outlived its lock still releases and reports its overrun; then it is forgotten, and said so
    // (`abandoned`: telemetry ends the run's span).
    after(entry, result.acquireSentAt + 2 * job.lockAtMostForMs, () => {
      held.delete(key);
      result.abandon();
    });
    return true;
  }

  const coordinator: RunCoordinator = {
    async shouldRun(key: string, ttlMs: number): Promise<boolean> {
      // Refused without a word (no warning, no event) once the guard is closed: node-cron goes on
      // asking at every tick of the user's tasks, which shutdown does not stop.
      if (runner.closed) return false;
      const match = KEY.exec(key);
      const name = match?.[1] ?? key;
      const slot = match?.[2] === undefined ? null : new Date(match[2]);
      if (GENERATED_NAME.test(name)) {
        warnOnce(
          name,
          'A distributed node-cron task has no name, so each replica would lock its own random id; it will not run. Give it a `name`.',
        );
        return false;
      }
      const job = jobFor(name, ttlMs);
      if (job === undefined) return false;
      return take(key, job, slot);
    },
    async onComplete(key: string): Promise<void> {
      const entry = held.get(key);
      if (entry === undefined) return;
      held.delete(key);
      clearTimeout(entry.expiry);
      await entry.lock.finish(SUCCEEDED_ENDING);
    },
  };
  answerTriggersOfServedTasks(
    coordinator,
    () => runner.closed,
    host.watchTriggers,
    (name, leaseMs) =>
      // Declared when found, not at its first fire: `cronguard trigger` refuses a name the tables have never seen.
      GENERATED_NAME.test(name) ? undefined : jobFor(name, leaseMs),
  );
  return coordinator;
}

/** node-cron 4.6 keeps a task's time zone on the task (not in its typings). */
interface ScheduledTaskFields {
  readonly name: string;
  readonly timezone?: string;
  getPattern(): string;
}

interface HeldEntry {
  readonly lock: HeldLock;
  expiry: NodeJS.Timeout | undefined;
}

/** Runs `then` at `at` (performance.now() time), re-armed past a timer's longest wait. */
function after(entry: HeldEntry, at: number, then: () => void): void {
  const remaining = at - performance.now();
  entry.expiry =
    remaining > MAX_TIMER_MS ? setTimeout(() => after(entry, at, then), MAX_TIMER_MS) : setTimeout(then, Math.max(0, remaining));
  entry.expiry.unref();
}

/** The coordinator's own durations, each falling back to the guard's defaults; a `TypeError` when wrong. */
function coordinatorDurations(options: CoordinatorOptions, defaults: ResolvedDefaults): ResolvedDefaults {
  const own = resolveDefaults(options, 'coordinator');
  const lockAtMostForMs = options?.lockAtMostFor === undefined ? defaults.lockAtMostForMs : own.lockAtMostForMs;
  const lockAtLeastForMs = options?.lockAtLeastFor === undefined ? defaults.lockAtLeastForMs : own.lockAtLeastForMs;
  if (lockAtMostForMs !== undefined) {
    const error = lockAtLeastForError(
      { option: sourceOf(options, 'lockAtLeastFor'), ms: lockAtLeastForMs },
      { option: sourceOf(options, 'lockAtMostFor'), ms: lockAtMostForMs },
      undefined,
    );
    if (error !== undefined) throw error;
  }
  return { lockAtMostForMs, lockAtLeastForMs };
}

/** Where a coordinator's duration comes from, named as errors name it: its own option, else the guard's default. */
function sourceOf(options: CoordinatorOptions | undefined, option: keyof CoordinatorOptions): string {
  return options?.[option] === undefined ? `defaults.${option}` : `coordinator.${option}`;
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
function answerTriggersOfServedTasks(
  coordinator: RunCoordinator,
  closed: () => boolean,
  watchTriggers: CoordinatorHost['watchTriggers'],
  jobFor: (name: string, leaseMs: number) => ResolvedJob | undefined,
): void {
  const watched = new Map<ScheduledTask, () => void>();
  const heard = new WeakSet<ScheduledTask>();
  const scan = (): void => {
    if (closed()) {
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
        watchTriggers(job, () => task.execute()),
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
