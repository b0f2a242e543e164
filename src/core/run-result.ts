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
