import { GuardError } from './errors.js';
import type { Execution, ExecutionContext } from './execution-context.js';
import type { RunEnding } from './run-result.js';

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

/** How deep a `cause` chain is followed: far enough for an error wrapped a few times, never a cycle. */
const MAX_CAUSE_DEPTH = 8;

/**
 * Whether a job's error says it stopped because its signal aborted: the error is the signal's
 * reason itself (`signal.throwIfAborted()`, `reject(signal.reason)`), or has it in its `cause`
 * chain (the `AbortError` of `timers/promises` and `events.once`, whose `cause` is the reason, or
 * an error of the job's own wrapping one). `reason` is the execution's abort reason, undefined while
 * its signal has not aborted. Never throws, whatever the job threw.
 */
export function isCancellation(error: unknown, reason: GuardError | undefined): boolean {
  if (reason === undefined) return false;
  let current = error;
  for (let depth = 0; depth <= MAX_CAUSE_DEPTH; depth += 1) {
    if (current === reason) return true;
    if ((typeof current !== 'object' && typeof current !== 'function') || current === null) return false;
    try {
      current = (current as { cause?: unknown }).cause;
    } catch {
      // A revoked Proxy, or a `cause` getter that throws: not a cancellation.
      return false;
    }
  }
  return false;
}
