import { randomUUID } from 'node:crypto';
import type { AcquireOutcome, AcquireRequest, Dialect, LockStore, RunOutcome } from './dialect.js';
import { GuardError } from './errors.js';
import { executionStorage } from './current-execution.js';
import { Execution, type ExecutionContext } from './execution-context.js';
import type { ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';
import { TIMED_OUT, withTimeout } from './timeout.js';
import { SKIPPED_LOCKED, SKIPPED_SLOT_DONE, type RunResult, type Skip } from './run-result.js';

/** What one execution needs from its guard. */
export interface ExecuteEnvironment {
  readonly store: LockStore;
  readonly dialect: Dialect;
  readonly lockedBy: string;
  readonly logger: Logger;
  /** Whether a skipped execution gets a `skipped` history row. */
  readonly recordSkips: boolean;
  /** The executions whose job is running now, for shutdown to signal. */
  readonly running: Set<Execution>;
  /** How long an acquire or a release may take before the guard gives up on it. */
  readonly statementTimeoutMs: number;
  /** Whether the guard is shutting down: a job that starts now is told to stop at once. */
  isStopping(): boolean;
}

/** The longest error message kept in the history, in characters. */
const MAX_ERROR_LENGTH = 4_096;

/** A job body. */
export type JobFunction<T> = (context: ExecutionContext) => T | Promise<T>;

/** An execution that holds its job's lock, between `acquireLock` and `releaseLock`. */
export interface HeldLock {
  readonly job: ResolvedJob;
  readonly request: AcquireRequest;
  /** performance.now() just before the acquire was sent: where the job's deadline counts from. */
  readonly acquireSentAt: number;
}

/**
 * Takes the job's lock for one execution, or says why not. Never rejects: a failed acquire is a
 * skip with reason 'error' (fail closed, never run unguarded), reported to the logger.
 */
export async function acquireLock(
  environment: ExecuteEnvironment,
  job: ResolvedJob,
  slot: Date | null,
): Promise<HeldLock | Skip> {
  // A fresh token per execution is the ownership check; locked_by is only for humans.
  const request: AcquireRequest = { token: randomUUID(), lockedBy: environment.lockedBy, slot };
  // The deadline counts from before the acquire is sent: the lock's expiry on the database clock
  // cannot be earlier than this plus lockAtMostFor.
  const acquireSentAt = performance.now();
  let outcome: AcquireOutcome | typeof TIMED_OUT;
  const acquiring = environment.store.acquire(job, request);
  try {
    outcome = await withTimeout(acquiring, environment.statementTimeoutMs);
  } catch (cause) {
    const error = acquireError(environment.dialect, job, cause);
    environment.logger.error(error.message);
    return { executed: false, reason: 'error', error };
  }
  if (outcome === TIMED_OUT) {
    // Skipped rather than piled up behind a hung database. If the acquire still wins later,
    // nobody runs under that lock: give it back at once.
    acquiring.then(
      (late) => {
        if (late === 'acquired') void releaseLock(environment, { job, request, acquireSentAt }, ACQUIRE_TIMED_OUT);
      },
      () => undefined,
    );
    const error = new GuardError(
      'ACQUIRE_TIMEOUT',
      `Taking the lock of job "${job.name}" took over ${environment.statementTimeoutMs} ms, so the run was skipped`,
      { job: job.name },
    );
    environment.logger.error(error.message);
    return { executed: false, reason: 'error', error };
  }
  if (outcome === 'acquired') return { job, request, acquireSentAt };
  if (environment.recordSkips) await recordSkip(environment, job, request);
  return outcome === 'slot-done' ? SKIPPED_SLOT_DONE : SKIPPED_LOCKED;
}

export function isHeld(value: HeldLock | Skip): value is HeldLock {
  return 'request' in value;
}

/**
 * One guarded execution: acquire, run, release. A job that throws rejects with its own error,
 * after the release. The guard's own failures never reject: see `acquireLock` and `releaseLock`.
 */
export async function execute<T>(
  environment: ExecuteEnvironment,
  job: ResolvedJob,
  fn: JobFunction<T>,
  slot: Date | null = null,
): Promise<RunResult<Awaited<T>>> {
  const held = await acquireLock(environment, job, slot);
  if (!isHeld(held)) return held;
  const execution = new Execution(job, slot, held.acquireSentAt);
  environment.running.add(execution);
  // Won while the guard began to shut down: the job is told to stop at once.
  if (environment.isStopping()) execution.abort(shutdownReason(job.name));
  let value: Awaited<T>;
  try {
    value = await executionStorage.run(execution, () => fn(execution));
  } catch (jobError) {
    execution.end();
    environment.running.delete(execution);
    await releaseLock(environment, held, { status: 'failed', error: errorText(jobError) });
    throw jobError;
  }
  execution.end();
  environment.running.delete(execution);
  await releaseLock(environment, held, SUCCEEDED);
  return { executed: true, value };
}

export const SUCCEEDED: RunOutcome = Object.freeze({ status: 'succeeded', error: null });
const ACQUIRE_TIMED_OUT: RunOutcome = Object.freeze({ status: 'failed', error: 'not run: the acquire answered after acquireTimeout' });

/** The reason `ctx.signal` aborts with when the guard shuts down. */
export function shutdownReason(job: string): GuardError {
  return new GuardError('SHUTDOWN', `The guard is shutting down: job "${job}" should stop`, { job });
}

/**
 * Gives the lock up and finishes the run's history row. Never rejects: a release that matches no
 * row (the lock was lost) is a warning, a failed one an error, both to the logger; the lock then
 * expires by itself at lockAtMostFor.
 */
export async function releaseLock(environment: ExecuteEnvironment, held: HeldLock, outcome: RunOutcome): Promise<void> {
  const { job } = held;
  try {
    const released = await withTimeout(environment.store.release(job, held.request.token, outcome), environment.statementTimeoutMs);
    if (released === TIMED_OUT) {
      environment.logger.error(
        `Releasing the lock of job "${job.name}" took over ${environment.statementTimeoutMs} ms; if it never completes, the lock expires at lockAtMostFor`,
      );
    } else if (!released) {
      environment.logger.warn(
        `Job "${job.name}" outlived its lock: lockAtMostFor (${job.lockAtMostForMs} ms) passed and another ` +
          'execution took the lock before this one released it, so the two may have overlapped. ' +
          "The other holder's lock was left alone. Raise lockAtMostFor above the job's longest run.",
      );
    }
  } catch (cause) {
    const error = new GuardError(
      'RELEASE_FAILED',
      `Releasing the lock of job "${job.name}" failed; it expires by itself at lockAtMostFor: ${messageOf(cause)}`,
      { cause, job: job.name },
    );
    environment.logger.error(error.message);
  }
}

async function recordSkip(environment: ExecuteEnvironment, job: ResolvedJob, request: AcquireRequest): Promise<void> {
  try {
    await environment.store.recordSkip(job, request);
  } catch (cause) {
    environment.logger.error(`Recording a skipped run of job "${job.name}" failed: ${messageOf(cause)}`);
  }
}

/** The job's error as history keeps it: its message, cut to 4,096 characters. */
export function errorText(error: unknown): string {
  const text = messageOf(error);
  return text.length <= MAX_ERROR_LENGTH ? text : Array.from(text).slice(0, MAX_ERROR_LENGTH).join('');
}

function acquireError(dialect: Dialect, job: ResolvedJob, cause: unknown): GuardError {
  if (dialect.isMissingTable(cause)) {
    return new GuardError(
      'TABLE_MISSING',
      `The cronguard lock table does not exist; run \`await guard.migrate()\` or \`npx cronguard migrate\`. ` +
        `Job "${job.name}" was skipped.`,
      { cause, job: job.name },
    );
  }
  return new GuardError(
    'ACQUIRE_FAILED',
    `Taking the lock of job "${job.name}" failed, so the run was skipped: ${messageOf(cause)}`,
    { cause, job: job.name },
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
