import { AsyncLocalStorage } from 'node:async_hooks';
import { GuardError } from './errors.js';
import type { Execution, ExecutionContext } from './execution-context.js';

/** The execution whose job is running in the current async context. */
export const executionStorage = new AsyncLocalStorage<Execution>();

/**
 * The context of the guarded execution this code runs in (its name, slot and deadline `signal`), or
 * undefined outside one, and in a timer or promise its job left behind once the job has returned or
 * thrown (keep the context you were given to look at its aborted `signal` then). For decorated
 * methods, which take no context argument.
 */
export function currentExecution(): ExecutionContext | undefined {
  const execution = executionStorage.getStore();
  return execution === undefined || execution.ended ? undefined : execution;
}

/**
 * Throws a `GuardError` of code `NOT_LOCKED` unless called inside a guarded execution whose job is
 * still running: for code that must only ever run under its lock, to catch a call around the guard
 * by mistake, or from a timer or promise the job left behind after it ended and gave its lock back.
 */
export function assertLocked(): ExecutionContext {
  const execution = executionStorage.getStore();
  if (execution === undefined) {
    throw new GuardError('NOT_LOCKED', 'assertLocked() was called outside a guarded execution: this code ran without its lock');
  }
  if (execution.ended) {
    throw new GuardError(
      'NOT_LOCKED',
      `assertLocked() was called after the execution of job "${execution.name}" had ended: this code (left behind by the job) runs without its lock`,
      { job: execution.name },
    );
  }
  return execution;
}
