import { isCancellation } from './cancellation.js';
import { GuardError } from './errors.js';
import type { Execution, ExecutionContext } from './execution-context.js';
import type { RunEnding } from './held-lock.js';

/** A job body. */
export type JobFunction<T> = (context: ExecutionContext) => T | Promise<T>;

/**
 * How an execution whose job threw ended: `cancelled` when it rejected with its signal's reason
 * (see `isCancellation`), else `failed`. Read before the execution ends (its signal then aborts
 * with EXECUTION_ENDED). Never throws.
 */
export function endingOf(execution: Execution, jobError: unknown): RunEnding {
  const reason = execution.abortReason;
  if (isCancellation(jobError, reason) && reason !== undefined) return { status: 'cancelled', reason, error: jobError };
  return { status: 'failed', error: jobError };
}

/** The reason `ctx.signal` aborts with when the guard shuts down. */
export function shutdownReason(job: string): GuardError {
  return new GuardError('SHUTDOWN', `The guard is shutting down: job "${job}" should stop`, { job });
}
