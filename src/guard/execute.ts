import { randomUUID } from 'node:crypto';
import type { Dialect, LockStore, RunOutcome } from './dialect.js';
import { GuardError } from './errors.js';
import { Execution, type ExecutionContext } from './execution-context.js';
import type { ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';
import { SKIPPED_LOCKED, type RunResult } from './run-result.js';

/** What one execution needs from its guard. */
export interface ExecuteEnvironment {
  readonly store: LockStore;
  readonly dialect: Dialect;
  readonly lockedBy: string;
  readonly logger: Logger;
  /** Whether a skipped execution gets a `skipped` history row. */
  readonly recordSkips: boolean;
}

/** The longest error message kept in the history, in characters. */
const MAX_ERROR_LENGTH = 4_096;

/** A job body. */
export type JobFunction<T> = (context: ExecutionContext) => T | Promise<T>;

/**
 * One guarded execution: acquire, run, release. A job that throws rejects with its own error,
 * after the release. The guard's own failures never reject: a failed acquire is a skip with
 * reason 'error' (fail closed, never run unguarded), and a failed release is logged (the lock
 * expires by itself at lockAtMostFor).
 */
export async function execute<T>(
  environment: ExecuteEnvironment,
  job: ResolvedJob,
  fn: JobFunction<T>,
): Promise<RunResult<Awaited<T>>> {
  const { store, logger } = environment;
  // A fresh token per execution is the ownership check; locked_by is only for humans.
  const token = randomUUID();
  // The deadline counts from before the acquire is sent: the lock's expiry on the database clock
  // cannot be earlier than this plus lockAtMostFor.
  const acquireSentAt = performance.now();
  let acquired: boolean;
  try {
    acquired = await store.acquire(job, token, environment.lockedBy);
  } catch (cause) {
    const error = acquireError(environment.dialect, job, cause);
    logger.error(error.message);
    return { executed: false, reason: 'error', error };
  }
  if (!acquired) {
    if (environment.recordSkips) await recordSkip(environment, job, token);
    return SKIPPED_LOCKED;
  }

  const execution = new Execution(job, acquireSentAt);
  let value: Awaited<T>;
  try {
    value = await fn(execution);
  } catch (jobError) {
    execution.end();
    await release(environment, job, token, { status: 'failed', error: errorText(jobError) });
    throw jobError;
  }
  execution.end();
  await release(environment, job, token, SUCCEEDED);
  return { executed: true, value };
}

const SUCCEEDED: RunOutcome = Object.freeze({ status: 'succeeded', error: null });

async function release(environment: ExecuteEnvironment, job: ResolvedJob, token: string, outcome: RunOutcome): Promise<void> {
  try {
    const released = await environment.store.release(job, token, outcome);
    if (!released) {
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

async function recordSkip(environment: ExecuteEnvironment, job: ResolvedJob, token: string): Promise<void> {
  try {
    await environment.store.recordSkip(job, token, environment.lockedBy);
  } catch (cause) {
    environment.logger.error(`Recording a skipped run of job "${job.name}" failed: ${messageOf(cause)}`);
  }
}

/** The job's error as history keeps it: its message, cut to 4,096 characters. */
function errorText(error: unknown): string {
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
