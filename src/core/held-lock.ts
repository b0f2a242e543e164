import type { AcquireRequest, RunOutcome } from './dialect.js';
import { errorText, storableText, GuardError, messageOf } from './errors.js';
import type { ExecutionHooks, ExtendOutcome } from './execution-context.js';
import type { ResolvedJob } from './job-options.js';
import { releaseLock, SUCCEEDED, type LockClaim } from './release.js';
import type { RunState } from './run-state.js';
import type { RunEnding, Skip } from './run-result.js';
import { MAX_TIMER_MS, statementAnswer, TIMED_OUT } from './timeout.js';

/**
 * A lock this process took for one execution, from the win to its release: what `Runner.take`
 * returns to a caller that runs the work itself (the node-cron coordinator), and what the Runner's
 * own runs are built on. Ending it through `finish` emits the same events, releases the same way
 * and finishes the same history row whatever started the run.
 */
export class HeldLock implements LockClaim, ExecutionHooks {
  readonly job: ResolvedJob;
  readonly request: AcquireRequest;
  readonly acquireSentAt: number;
  readonly #state: RunState;
  /** Finished, given back or abandoned: nothing more is reported or released. */
  #done = false;
  #settle: (() => void) | undefined;
  #expiryTimer: NodeJS.Timeout | undefined;

  constructor(state: RunState, job: ResolvedJob, request: AcquireRequest, acquireSentAt: number) {
    this.#state = state;
    this.job = job;
    this.request = request;
    this.acquireSentAt = acquireSentAt;
  }

  /** The execution's token: the `runId` of its events, the `id` of its history row. */
  get runId(): string {
    return this.request.token;
  }

  /** The slot the lock was taken for (null: an unscheduled run). */
  get slot(): Date | null {
    return this.request.slot;
  }

  /** Extends the lock by `durationMs` from now while this execution holds it; an execution's keep-alive and `ctx.extend` call it. */
  async extend(durationMs: number): Promise<ExtendOutcome> {
    const { store, statementTimeoutMs, logger, events } = this.#state.dependencies;
    const { job } = this;
    try {
      const extended = await statementAnswer(store, store.extend(job, this.runId, durationMs), statementTimeoutMs);
      if (extended === TIMED_OUT) throw new Error(`no answer within ${statementTimeoutMs} ms`);
      return extended ? 'extended' : 'lost';
    } catch (cause) {
      const error = new GuardError('EXTEND_FAILED', `Extending the lock of job "${job.name}" failed: ${messageOf(cause)}`, {
        cause,
        job: job.name,
      });
      logger.error(error.message);
      events.emit('error', { job: job.name, error });
      return 'failed';
    }
  }

  /** An extend found the lock taken by another execution. */
  lost(): void {
    const { logger, events } = this.#state.dependencies;
    logger.warn(`Job "${this.job.name}" lost its lock at an extend: another execution holds it; its signal aborts now`);
    events.emit('lock-lost', { job: this.job.name, runId: this.runId, during: 'extend' });
  }

  /**
   * Ends the run: emits `succeeded`, `failed` or `cancelled`, then releases the lock (keeping
   * lockAtLeastFor; the history row is finished with the outcome), then takes the guard's
   * `finished` step (RunSteps: the auto-pause count, the retention prune). `lockExpiresAt` is when
   * the holder believes the lock expires (an execution's, moved by its extends); by default
   * lockAtMostFor after the acquire was sent. Once: a later call, or one after `abandon`, does
   * nothing. Never rejects.
   */
  async finish(ending: RunEnding, lockExpiresAt = this.acquireSentAt + this.job.lockAtMostForMs): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    // Nothing here throws (the outcome and the events never do), so the release always comes.
    const outcome = this.#report(ending);
    const released = await releaseLock(this.#state, this, outcome, lockExpiresAt);
    this.#settled();
    this.#state.dependencies.steps.finished(this.job, ending, released);
  }

  /**
   * Gives back a lock nobody ran under (a take that answered after acquireTimeout, whose run was
   * already skipped): released with `outcome`, no run event. The slot, if any, stays marked as run.
   */
  async giveBack(outcome: RunOutcome): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    await releaseLock(this.#state, this, outcome, this.acquireSentAt + this.job.lockAtMostForMs);
    this.#settled();
  }

  /**
   * The holder will never finish (node-cron never called the coordinator's onComplete): emits
   * `abandoned`. The lock expires by itself; the history row stays `running` until the job's next
   * run marks it `abandoned`.
   */
  abandon(): void {
    if (this.#done) return;
    this.#done = true;
    this.#settled();
    const durationMs = this.#elapsed();
    this.#state.dependencies.events.emit('abandoned', { job: this.job.name, runId: this.runId, durationMs });
  }

  /**
   * Settles once the run is finished (released), given back or abandoned, or once its lock has
   * expired (lockAtMostFor after the acquire): how long shutdown waits for a holder that runs the
   * work outside the runner, which may never say it finished.
   */
  untilFinishedOrExpired(): Promise<void> {
    if (this.#done) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#settle = resolve;
      this.#expireAt(this.acquireSentAt + this.job.lockAtMostForMs);
    });
  }

  /** Emits the ending's event, and returns the outcome its history row records. */
  #report(ending: RunEnding): RunOutcome {
    const { events } = this.#state.dependencies;
    const job = this.job.name;
    if (ending.status === 'succeeded') {
      if (events.has('succeeded')) events.emit('succeeded', { job, runId: this.runId, durationMs: this.#elapsed() });
      return SUCCEEDED;
    }
    const payload = { job, runId: this.runId, durationMs: this.#elapsed(), error: ending.error };
    if (ending.status === 'cancelled') {
      events.emit('cancelled', { ...payload, reason: ending.reason });
      return { status: 'cancelled', error: storableText(ending.reason.message) };
    }
    events.emit('failed', payload);
    return { status: 'failed', error: errorText(ending.error) };
  }

  #elapsed(): number {
    return Math.round(performance.now() - this.acquireSentAt);
  }

  #settled(): void {
    clearTimeout(this.#expiryTimer);
    this.#settle?.();
  }

  /** Settles `untilFinishedOrExpired` at `at` (performance.now() time), re-armed past a timer's longest wait. */
  #expireAt(at: number): void {
    const remaining = at - performance.now();
    this.#expiryTimer =
      remaining > MAX_TIMER_MS
        ? setTimeout(() => this.#expireAt(at), MAX_TIMER_MS)
        : setTimeout(() => this.#settle?.(), Math.max(0, remaining));
    this.#expiryTimer.unref();
  }
}

/** Whether a take won (a lock to finish) rather than skipped. */
export function isHeld(value: HeldLock | Skip): value is HeldLock {
  return value instanceof HeldLock;
}
