import { acquireLock, isHeld } from './acquire.js';
import { executionStorage } from './current-execution.js';
import type { ExecuteEnvironment, HeldLock } from './environment.js';
import { GuardError, messageOf } from './errors.js';
import { Execution, type ExecutionContext, type ExecutionHooks } from './execution-context.js';
import type { ResolvedJob } from './job-options.js';
import { releaseLock, SUCCEEDED } from './release.js';
import type { RunResult } from './run-result.js';
import { statementAnswer, TIMED_OUT } from './timeout.js';

/** A job body. */
export type JobFunction<T> = (context: ExecutionContext) => T | Promise<T>;

/** The longest error message kept in the history, in characters. */
const MAX_ERROR_LENGTH = 4_096;

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
  const execution = new Execution(job, held.request.token, slot, held.acquireSentAt, extendHooks(environment, held));
  environment.running.add(execution);
  // Won while the guard began to shut down: the job is told to stop at once.
  if (environment.isStopping()) execution.abort(shutdownReason(job.name));
  const { events } = environment;
  let value: Awaited<T>;
  try {
    value = await executionStorage.run(execution, () => fn(execution));
  } catch (jobError) {
    finish(environment, execution);
    if (events.has('failed')) events.emit('failed', { job: job.name, runId: execution.runId, durationMs: elapsed(held), error: jobError });
    await releaseLock(environment, held, { status: 'failed', error: errorText(jobError) }, execution.lockExpiresAt);
    throw jobError;
  }
  finish(environment, execution);
  if (events.has('succeeded')) events.emit('succeeded', { job: job.name, runId: execution.runId, durationMs: elapsed(held) });
  await releaseLock(environment, held, SUCCEEDED, execution.lockExpiresAt);
  return { executed: true, value };
}

function finish(environment: ExecuteEnvironment, execution: Execution): void {
  execution.end();
  environment.running.delete(execution);
}

function elapsed(held: HeldLock): number {
  return Math.round(performance.now() - held.acquireSentAt);
}

/** How an execution extends its lock, and reports it lost. */
function extendHooks(environment: ExecuteEnvironment, held: HeldLock): ExecutionHooks {
  const { job } = held;
  const runId = held.request.token;
  return {
    async extend(durationMs) {
      try {
        const extended = await statementAnswer(environment.store, environment.store.extend(job, runId, durationMs), environment.statementTimeoutMs);
        if (extended === TIMED_OUT) throw new Error(`no answer within ${environment.statementTimeoutMs} ms`);
        return extended ? 'extended' : 'lost';
      } catch (cause) {
        const error = new GuardError('EXTEND_FAILED', `Extending the lock of job "${job.name}" failed: ${messageOf(cause)}`, {
          cause,
          job: job.name,
        });
        environment.logger.error(error.message);
        environment.events.emit('error', { job: job.name, error });
        return 'failed';
      }
    },
    lost() {
      environment.logger.warn(`Job "${job.name}" lost its lock at an extend: another execution holds it; its signal aborts now`);
      environment.events.emit('lock-lost', { job: job.name, runId, during: 'extend' });
    },
  };
}

/** The reason `ctx.signal` aborts with when the guard shuts down. */
export function shutdownReason(job: string): GuardError {
  return new GuardError('SHUTDOWN', `The guard is shutting down: job "${job}" should stop`, { job });
}

/** The job's error as history keeps it: its message, cut to 4,096 characters. */
export function errorText(error: unknown): string {
  const text = messageOf(error);
  return text.length <= MAX_ERROR_LENGTH ? text : Array.from(text).slice(0, MAX_ERROR_LENGTH).join('');
}
