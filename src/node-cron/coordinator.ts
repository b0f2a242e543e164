import type { RunCoordinator } from 'node-cron';
import type { DurationInput } from '../guard/duration.js';
import { acquireLock, isHeld } from '../guard/acquire.js';
import type { ExecuteEnvironment, HeldLock } from '../guard/environment.js';
import { releaseLock, SUCCEEDED } from '../guard/release.js';
import type { InFlight } from '../guard/in-flight.js';
import { resolveJob, type ResolvedDefaults, type ResolvedJob } from '../guard/job-options.js';

/** Lock durations for the tasks a node-cron coordinator serves. */
export interface CoordinatorOptions {
  /** The lockAtMostFor of every task. @default the guard's `defaults.lockAtMostFor`, else the task's `distributedLease` (node-cron's default: 30 s) */
  lockAtMostFor?: DurationInput;
  /** The lockAtLeastFor of every task. @default the guard's `defaults.lockAtLeastFor`, else 0 */
  lockAtLeastFor?: DurationInput;
}

/** What a coordinator needs from its guard. */
export interface CoordinatorHost {
  readonly environment: ExecuteEnvironment;
  readonly defaults: ResolvedDefaults;
  readonly inFlight: InFlight;
  isClosed(): boolean;
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
 */
export function createRunCoordinator(host: CoordinatorHost, options: CoordinatorOptions = {}): RunCoordinator {
  // Checked now, so that a bad duration fails at start-up rather than at the first tick.
  resolveJob({ name: 'coordinator', ...options }, { ...host.defaults, lockAtMostForMs: host.defaults.lockAtMostForMs ?? 1 });
  const held = new Map<string, { lock: HeldLock; done: () => void; expiry: NodeJS.Timeout }>();
  const jobs = new Map<string, ResolvedJob>();
  const warned = new Set<string>();
  const { environment } = host;

  function jobFor(name: string, ttlMs: number): ResolvedJob {
    let job = jobs.get(name);
    if (job === undefined) {
      job = resolveJob({ name, ...options }, { ...host.defaults, lockAtMostForMs: host.defaults.lockAtMostForMs ?? ttlMs });
      jobs.set(name, job);
    }
    return job;
  }

  return {
    async shouldRun(key: string, ttlMs: number): Promise<boolean> {
      if (host.isClosed()) return false;
      const match = KEY.exec(key);
      const name = match?.[1] ?? key;
      const slot = match?.[2] === undefined ? null : new Date(match[2]);
      if (GENERATED_NAME.test(name)) {
        if (!warned.has(name)) {
          warned.add(name);
          environment.logger.error(
            `A distributed node-cron task has no name, so each replica would lock its own random id; it will not run. Give it a \`name\`.`,
          );
        }
        return false;
      }
      const result = await acquireLock(environment, jobFor(name, ttlMs), slot);
      if (!isHeld(result)) return false;
      let done!: () => void;
      host.inFlight.track(new Promise<void>((resolve) => (done = resolve)));
      // node-cron may never call onComplete (a task stopped during its random delay, a forked
      // task whose child died): forget the lock when it expires by itself.
      const expiry = setTimeout(() => {
        held.delete(key);
        done();
      }, result.job.lockAtMostForMs);
      expiry.unref();
      held.set(key, { lock: result, done, expiry });
      return true;
    },
    async onComplete(key: string): Promise<void> {
      const entry = held.get(key);
      if (entry === undefined) return;
      held.delete(key);
      clearTimeout(entry.expiry);
      const { lock } = entry;
      if (environment.events.has('succeeded')) {
        const durationMs = Math.round(performance.now() - lock.acquireSentAt);
        environment.events.emit('succeeded', { job: lock.job.name, runId: lock.request.token, durationMs });
      }
      await releaseLock(environment, lock, SUCCEEDED, lock.acquireSentAt + lock.job.lockAtMostForMs);
      entry.done();
    },
  };
}
