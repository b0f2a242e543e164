import type { AcquireRequest } from './dialect.js';
import type { GuardError } from './errors.js';

/**
 * Why a run did not execute: another execution holds the lock (`locked`), this scheduled slot or a
 * later one already ran (`slot-done`), an operator paused the job (`paused`), or the guard could
 * not decide (`error`).
 */
export type SkipReason = 'locked' | 'slot-done' | 'paused' | 'error';

/**
 * The outcome of `guard.run`. A skip is a normal outcome, not an exception: N−1 replicas skip
 * every tick. `error` (a `GuardError` whose `cause` is the driver's error) comes with reason
 * 'error': the guard could not decide, and failed closed.
 */
export type RunResult<T> =
  | { readonly executed: true; readonly value: T }
  | { readonly executed: false; readonly reason: 'locked' | 'slot-done' | 'paused' }
  | { readonly executed: false; readonly reason: 'error'; readonly error: GuardError };

/** A skip, as `guard.run` resolves it. */
export type Skip = Extract<RunResult<never>, { executed: false }>;

export const SKIPPED_LOCKED: Skip = Object.freeze({ executed: false, reason: 'locked' });
export const SKIPPED_SLOT_DONE: Skip = Object.freeze({ executed: false, reason: 'slot-done' });
export const SKIPPED_PAUSED: Skip = Object.freeze({ executed: false, reason: 'paused' });

/**
 * What asked for one run. Every way of starting a run (a call, a scheduled fire, the node-cron
 * coordinator) describes it with one of these, and the `Runner` carries it to the acquire: a new
 * way to ask (a manual trigger, say, with who asked) is a new field here, turned into the lock
 * store's `AcquireRequest` in one place (`LockAcquirer.acquire`).
 */
export interface RunRequest {
  /**
   * The nominal scheduled time the run is for; null for an unscheduled call, for which a job with
   * a `cron` option claims the slot its expression last fired at (`Runner.runResolved`).
   */
  readonly slot: Date | null;
  /**
   * The pending "run now" request this run answers (`guard.trigger`, through the trigger poll):
   * its take requires and clears the lock row's `trigger_id`, so one replica runs it; with `force`
   * it runs even while the job is paused. Absent for every other run.
   */
  readonly trigger?: AcquireRequest['trigger'];
}

/** A run that no schedule asked for: a call by hand, a method decorator's call. */
export const UNSCHEDULED: RunRequest = Object.freeze({ slot: null });

/** How a run that held its lock ended: what `HeldLock.finish` reports and records. */
export type RunEnding =
  | { readonly status: 'succeeded' }
  /** The job threw `error` (its own error, which `run` rejects with). */
  | { readonly status: 'failed'; readonly error: unknown }
  /** The job stopped because its signal aborted with `reason`; it threw `error`. */
  | { readonly status: 'cancelled'; readonly reason: GuardError; readonly error: unknown };

export const SUCCEEDED_ENDING: RunEnding = Object.freeze({ status: 'succeeded' });
