import { AsyncLocalStorage } from 'node:async_hooks';
import { GuardError } from './errors.js';
import type { Execution, ExecutionContext } from './execution-context.js';

/** The execution whose job is running in the current async context. */
export const executionStorage = new AsyncLocalStorage<Execution>();

/**
 * The context of the guarded execution this code runs in (its name, slot and deadline `signal`), or
 * undefined outside one. For decorated methods, which take no context argument.
 */
export function currentExecution(): ExecutionContext | undefined {
  return executionStorage.getStore();
}

/**
 * Throws a `GuardError` of code `NOT_LOCKED` unless called inside a guarded execution: for code
 * that must only ever run under its lock, to catch a call around the guard by mistake.
 */
export function assertLocked(): ExecutionContext {
  const execution = executionStorage.getStore();
  if (execution === undefined) {
    throw new GuardError('NOT_LOCKED', 'assertLocked() was called outside a guarded execution: this code ran without its lock');
  }
  return execution;
}
