import { setTimeout as sleep } from 'node:timers/promises';
import type { AcquireRequest, RunOutcome } from './dialect.js';
import { GuardError, messageOf } from './errors.js';
import type { ResolvedJob } from './job-options.js';
import type { RunDependencies, RunState } from './run-state.js';
import { statementAnswer, TIMED_OUT } from './timeout.js';

export const SUCCEEDED: RunOutcome = Object.freeze({ status: 'succeeded', error: null });

/** A lock an execution took: what its release reads. `HeldLock` is one. */
export interface LockClaim {
  readonly job: ResolvedJob;
  readonly request: AcquireRequest;
  /** performance.now() just before the acquire was sent: where the job's deadline counts from. */
  readonly acquireSentAt: number;
}

/** Waits between release attempts after a failure: 200 ms, 800 ms, 3.2 s. */
const RELEASE_BACKOFF_MS = [200, 800, 3_200] as const;

/**
 * Gives the lock up and finishes the run's history row. Never rejects. A release that matches no
 * row means the lock was lost (a warning and a `lock-lost` event); a run that outlived its lock
 * is `overran` (a warning and an event). A failed release is retried with backoff while the lock
 * is still ours (`lockExpiresAt`, on the monotonic clock), then reported; the lock then expires by
 * itself at lockAtMostFor. Once shutdown has ended the guard's connections, a failed release is
 * reported at once: no retry, and no timer keeping the process alive. Resolves with whether the
 * release statement answered (the history row then has the outcome).
 *
 * The retries carry no error text: the text is made storable (error-text.ts), but a schema changed
 * by hand (a shorter or non-UTF-8 `error` column, a trigger) can still refuse it, and what a job
 * threw must never keep its lock held. The cost: after a failure that was not the text's fault (a
 * dropped connection), the history row lacks the message, which the warning, the `failed` event
 * and `run`'s rejection still carry.
 */
export async function releaseLock(state: RunState, held: LockClaim, firstOutcome: RunOutcome, lockExpiresAt: number): Promise<boolean> {
  const job = releasedAs(held);
  const runId = held.request.token;
  const environment = state.dependencies;
  let outcome = firstOutcome;
  for (let attempt = 0; ; attempt += 1) {
    try {
      const released = await statementAnswer(
        environment.store,
        // A first attempt may share a statement with the releases that ended in the same turn; a retry goes alone.
        state.releases.release(job, runId, outcome, attempt > 0),
        environment.statementTimeoutMs,
      );
      if (released === TIMED_OUT) {
        // Not retried: the statement may still apply, and a second one would then match nothing.
        report(
          environment,
          held,
          `took over ${environment.statementTimeoutMs} ms; if it never completes, the lock expires at lockAtMostFor`,
        );
        return false;
      }
      if (environment.events.has('released')) environment.events.emit('released', { job: job.name, runId, released });
      // Free again once lockAtLeastFor has passed since the acquire (locked_at is no earlier).
      if (released) state.releasedLocks.released(job.name, held.acquireSentAt + job.lockAtLeastForMs);
      // After a failed attempt, a release that matches nothing may mean the earlier one got through.
      if (!released && attempt === 0) lost(environment, held);
      else if (performance.now() > lockExpiresAt) overran(environment, held);
      return true;
    } catch (cause) {
      if (state.stopped.aborted) {
        report(
          environment,
          held,
          `failed after shutdown ended the guard's connections; it expires by itself at lockAtMostFor: ${messageOf(cause)}`,
          cause,
        );
        return false;
      }
      const backoff = RELEASE_BACKOFF_MS[attempt];
      if (backoff === undefined || performance.now() + backoff >= lockExpiresAt) {
        report(environment, held, `failed; it expires by itself at lockAtMostFor: ${messageOf(cause)}`, cause);
        return false;
      }
      if (outcome.error !== null) {
        environment.logger.warn(
          `Releasing the lock of job "${job.name}" failed (${messageOf(cause)}); trying again without the job's error text, which its history row will lack`,
        );
        outcome = { status: outcome.status, error: null };
      }
      if (!(await pause(backoff, state.stopped))) {
        report(
          environment,
          held,
          `failed, and shutdown ended the guard's connections before it could be tried again; it expires by itself at lockAtMostFor: ${messageOf(cause)}`,
          cause,
        );
        return false;
      }
    }
  }
}

/**
 * The job as its release keeps the lock: a manual run (a trigger) keeps it for no lockAtLeastFor,
 * so that its lock is free as soon as it ends. lockAtLeastFor is there for a slot's run (a replica
 * whose timer fires late must find the lock still held); a trigger has no slot, and holding its
 * lock on would swallow the next scheduled slot that came within it (issue #35: a trigger at :57
 * with lockAtLeastFor 5 s kept the :00 slot from running). Every other run keeps its lockAtLeastFor.
 */
function releasedAs(held: LockClaim): ResolvedJob {
  return held.request.trigger === undefined ? held.job : { ...held.job, lockAtLeastForMs: 0 };
}

/** Waits `ms`, keeping the process alive meanwhile; false when `stopped` aborts first. */
async function pause(ms: number, stopped: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal: stopped });
    return true;
  } catch {
    return false;
  }
}

function lost(environment: RunDependencies, held: LockClaim): void {
  const { job } = held;
  environment.logger.warn(
    `Job "${job.name}" outlived its lock: lockAtMostFor (${job.lockAtMostForMs} ms) passed and another ` +
      'execution took the lock before this one released it, so the two may have overlapped. ' +
      "The other holder's lock was left alone. Raise lockAtMostFor above the job's longest run, or use keepAlive.",
  );
  environment.events.emit('lock-lost', { job: job.name, runId: held.request.token, during: 'release' });
  overran(environment, held, false);
}

function overran(environment: RunDependencies, held: LockClaim, warn = true): void {
  const { job } = held;
  const durationMs = Math.round(performance.now() - held.acquireSentAt);
  if (warn) {
    environment.logger.warn(
      `Job "${job.name}" overran its lock: it ran ${durationMs} ms, past its lock's expiry (lockAtMostFor ${job.lockAtMostForMs} ms); ` +
        'another replica could have started it meanwhile.',
    );
  }
  environment.events.emit('overran', {
    job: job.name,
    runId: held.request.token,
    durationMs,
    lockAtMostForMs: job.lockAtMostForMs,
  });
}

function report(environment: RunDependencies, held: LockClaim, what: string, cause?: unknown): void {
  const { job } = held;
  const error = new GuardError('RELEASE_FAILED', `Releasing the lock of job "${job.name}" ${what}`, {
    cause,
    job: job.name,
  });
  environment.logger.error(error.message);
  environment.events.emit('error', { job: job.name, error });
}
