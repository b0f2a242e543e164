import { acquireLock, isHeld } from './acquire.js';
import { isCancellation } from './cancellation.js';
import { executionStorage } from './current-execution.js';
import type { AcquireRequest, RunOutcome } from './dialect.js';
import type { ExecuteEnvironment, HeldLock } from './environment.js';
import { errorText, storableText } from './error-text.js';
import { GuardError, messageOf } from './errors.js';
import { Execution, type ExecutionContext, type ExecutionHooks } from './execution-context.js';
import type { ResolvedJob } from './job-options.js';
import { releaseLock, SUCCEEDED } from './release.js';
import type { RunResult } from './run-result.js';
import { statementAnswer, TIMED_OUT } from './timeout.js';

/** A job body. */
export type JobFunction<T> = (context: ExecutionContext) => T | Promise<T>;

/**
 * One guarded execution: acquire, run, release. A job that throws rejects with exactly what it
 * threw, after the release, whatever that is (text no database stores, a value that cannot be
 * turned into text). The guard's own failures never reject: see `acquireLock` and `releaseLock`.
 */
export async function execute<T>(
  environment: ExecuteEnvironment,
  job: ResolvedJob,
  fn: JobFunction<T>,
  slot: Date | null = null,
  trigger?: AcquireRequest['trigger'],
): Promise<RunResult<Awaited<T>>> {
  const held = await acquireLock(environment, job, slot, trigger);
  if (!isHeld(held)) return held;
  const execution = new Execution(job, held.request.token, slot, held.acquireSentAt, extendHooks(environment, held));
  environment.running.add(execution);
  // Won while the guard began to shut down: the job is told to stop at once.
  if (environment.isStopping()) execution.abort(shutdownReason(job.name));
  const { events, runContext } = environment;
  let value: Awaited<T>;
  try {
    value = await executionStorage.run(execution, () => (runContext === undefined ? fn(execution) : runContext(execution.runId, () => fn(execution))));
  } catch (jobError) {
    // Nothing here throws (the outcome and the events never do), so the release always comes.
    const outcome = failure(environment, held, execution, jobError);
    await releaseLock(environment, held, outcome, execution.lockExpiresAt);
    throw jobError;
  }
  finish(environment, execution);
  if (events.has('succeeded')) events.emit('succeeded', { job: job.name, runId: execution.runId, durationMs: elapsed(held) });
  await releaseLock(environment, held, SUCCEEDED, execution.lockExpiresAt);
  return { executed: true, value };
}

/**
 * Ends an execution whose job threw: `cancelled` when it rejected with its signal's reason (see
 * `isCancellation`), with that reason's message; else `failed` with its own. Never throws.
 */
function failure(environment: ExecuteEnvironment, held: HeldLock, execution: Execution, jobError: unknown): RunOutcome {
  const reason = execution.abortReason;
  const cancelled = isCancellation(jobError, reason);
  finish(environment, execution);
  const { events } = environment;
  const payload = { job: held.job.name, runId: execution.runId, durationMs: elapsed(held), error: jobError };
  if (cancelled && reason !== undefined) {
    events.emit('cancelled', { ...payload, reason });
    return { status: 'cancelled', error: storableText(reason.message) };
  }
  events.emit('failed', payload);
  return { status: 'failed', error: errorText(jobError) };
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
