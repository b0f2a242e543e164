import type { GuardError } from './errors.js';

/** Why a run did not execute. */
export type SkipReason = 'locked' | 'error';

/**
 * The outcome of `guard.run`. A skip is a normal outcome, not an exception: N−1 replicas skip
 * every tick. `error` (a `GuardError` whose `cause` is the driver's error) comes with reason
 * 'error': the guard could not decide, and failed closed.
 */
export type RunResult<T> =
  | { readonly executed: true; readonly value: T }
  | { readonly executed: false; readonly reason: 'locked' }
  | { readonly executed: false; readonly reason: 'error'; readonly error: GuardError };

export const SKIPPED_LOCKED: RunResult<never> = Object.freeze({ executed: false, reason: 'locked' });
