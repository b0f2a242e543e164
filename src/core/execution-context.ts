import { parseDuration, type DurationInput } from './duration.js';
import { GuardError, describeValue } from './errors.js';
import type { ResolvedJob } from './job-options.js';
import { MAX_TIMER_MS } from './timeout.js';
import { AsyncLocalStorage } from 'node:async_hooks';

/** What a guarded job receives. */
export interface ExecutionContext {
  /** The job's name. */
  readonly name: string;
  /** The run's id: its token, and the `id` of its history row. */
  readonly runId: string;
  /** The nominal scheduled time this run is for, or null for an unscheduled call. */
  readonly slot: Date | null;
  /** This run is the `catchUp` of a missed slot (`slot`), run once after a gap. */
  readonly catchUp: boolean;
  /**
   * Aborts before the lock can expire, with a `GuardError` as its reason: `DEADLINE` a stop margin
   * before the expiry, counted on the monotonic clock from just before the acquire (or the last
   * successful extend) was sent; `LOCK_LOST` when an extend finds the lock taken; `SHUTDOWN` when
   * the guard shuts down; `EXECUTION_ENDED` once the job has returned or thrown (for timers and
   * promises it left behind). Long jobs should check it and stop. A job that stops by rejecting with
   * the reason (or an error whose `cause` chain holds it) is recorded `cancelled`, not `failed`.
   */
  readonly signal: AbortSignal;
  /** Local estimate of when the lock expires, on the monotonic clock (`performance.now()`). */
  readonly lockExpiresAt: number;
  /**
   * Extends the lock to now + `duration` (default: lockAtMostFor) while this execution still holds
   * it. True when extended; false when it failed (the deadline does not move) or the lock was lost
   * (the signal aborts with `LOCK_LOST`).
   */
  extend(duration?: DurationInput): Promise<boolean>;
}

/** What an extend came to. */
export type ExtendOutcome = 'extended' | 'lost' | 'failed';

/** The guard's side of an execution: how to extend its lock, and whom to tell when it is lost. */
export interface ExecutionHooks {
  extend(durationMs: number): Promise<ExtendOutcome>;
  lost(): void;
}

/** How soon keep-alive tries again after a failed extend, at most. */
const KEEP_ALIVE_RETRY_MS = 1_000;

/**
 * The executions of every guard in this process with a timer that must fire by their deadline: an
 * armed deadline signal, or keep-alive. A synchronous wait (better-sqlite3's busy wait for another
 * connection's write lock) blocks the thread, so no timer fires meanwhile: the SQLite statements
 * wait no longer than `msToNearestDeadline()`.
 */
const armedSignals = new Set<Execution>();
const keptAlive = new Set<Execution>();

/**
 * How long this thread may block without holding a running execution's timers past its deadline:
 * the time left to the nearest one (0 when an armed signal is due and has not fired yet), or
 * Infinity when no execution in this process has one ahead.
 */
export function msToNearestDeadline(): number {
  let nearest = Number.POSITIVE_INFINITY;
  if (armedSignals.size === 0 && keptAlive.size === 0) return nearest;
  const now = performance.now();
  for (const execution of armedSignals) nearest = Math.min(nearest, Math.max(0, execution.deadline - now));
  // Past its deadline, keep-alive has nothing left to keep in time.
  for (const execution of keptAlive) {
    const left = execution.deadline - now;
    if (left > 0) nearest = Math.min(nearest, left);
  }
  return nearest;
}

/**
 * The context of one execution. The deadline timer is made only when the job reads `signal` (or
 * keep-alive runs), so that jobs that never look at it cost nothing on the hot path.
 */
export class Execution implements ExecutionContext {
  readonly name: string;
  readonly runId: string;
  readonly slot: Date | null;
  readonly catchUp = false;
  readonly #job: ResolvedJob;
  readonly #hooks: ExecutionHooks;
  #lockExpiresAt: number;
  #controller: AbortController | undefined;
  #timer: NodeJS.Timeout | undefined;
  #keepAliveTimer: NodeJS.Timeout | undefined;
  /** The timers are stopped: the job has ended, or its lock was lost. */
  #stopped = false;
  /** The job returned or threw. */
  #ended = false;
  /**
   * Set by `abort` before anyone read `signal`: the reason, or for the end of a run how to make it.
   * An error captures its stack when made (10-20 µs here, a fifth of the guard's own work per run on
   * PostgreSQL), and most jobs never read the signal: the end's reason is made only if someone does.
   */
  #abortedWith: GuardError | (() => GuardError) | undefined;

  constructor(job: ResolvedJob, runId: string, slot: Date | null, acquireSentAt: number, hooks: ExecutionHooks) {
    this.name = job.name;
    this.runId = runId;
    this.slot = slot;
    this.#job = job;
    this.#hooks = hooks;
    this.#lockExpiresAt = acquireSentAt + job.lockAtMostForMs;
    if (job.keepAliveIntervalMs !== undefined) {
      keptAlive.add(this);
      this.#scheduleKeepAlive(job.keepAliveIntervalMs);
    }
  }

  get lockExpiresAt(): number {
    return this.#lockExpiresAt;
  }

  /** When the signal fires: the lock's expiry, less the stop margin. */
  get deadline(): number {
    return this.#lockExpiresAt - this.#job.stopMarginMs;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const reason = this.#reasonBeforeSignal();
      if (reason !== undefined) this.#controller.abort(reason);
      else if (!this.#stopped) this.#arm();
    }
    return this.#controller.signal;
  }

  async extend(duration?: DurationInput): Promise<boolean> {
    if (this.#stopped) return false;
    const durationMs = duration === undefined ? this.#job.lockAtMostForMs : parseDuration(duration, { option: 'duration', job: this.name });
    if (durationMs <= 0) {
      throw new TypeError(
        `Expected \`duration\` of job ${JSON.stringify(this.name)} to be a duration greater than 0, got ${describeValue(duration)}`,
      );
    }
    // The new expiry counts from before the extend is sent; a failed or late one moves nothing.
    const sentAt = performance.now();
    const outcome = await this.#hooks.extend(durationMs);
    if (outcome === 'extended' && !this.#stopped) {
      this.#lockExpiresAt = Math.max(this.#lockExpiresAt, sentAt + durationMs);
      if (this.#controller !== undefined && !this.#controller.signal.aborted) this.#arm();
      return true;
    }
    // A 'lost' that answers after the job returned is not reported: the release, which clears the
    // token, may simply have come first (an un-awaited extend, or one waiting for a connection).
    // A lock really lost is then reported by the release itself.
    if (outcome === 'lost' && !this.#stopped) {
      this.#hooks.lost();
      this.abort(
        new GuardError('LOCK_LOST', `Job "${this.name}" lost its lock: another execution holds it now`, {
          job: this.name,
        }),
      );
      // Nothing left to keep alive.
      this.#stopTimers();
    }
    return false;
  }

  /**
   * Asks the job to stop now (shutdown, or the lock was lost). Keep-alive goes on until the job
   * returns: a job that takes a while to stop must not lose its lock meanwhile.
   */
  abort(reason: GuardError): void {
    // The first reason stays, as a signal aborts once.
    if (this.#controller === undefined) this.#abortedWith ??= reason;
    else if (!this.#controller.signal.aborted) this.#controller.abort(reason);
    this.#disarm();
  }

  /** The reason the signal aborted with (or will, when first read); undefined while it has not. */
  get abortReason(): GuardError | undefined {
    if (this.#controller === undefined) return this.#reasonBeforeSignal();
    return this.#controller.signal.aborted ? (this.#controller.signal.reason as GuardError) : undefined;
  }

  /** Whether the job has returned or thrown: `currentExecution()` and `assertLocked()` then say so. */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * The job returned or threw: stops the timers, and aborts the signal (`EXECUTION_ENDED`) unless it
   * already aborted, for whatever the job left running. Listeners the job added run now.
   */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#stopTimers();
    const reason = (): GuardError =>
      new GuardError('EXECUTION_ENDED', `The execution of job "${this.name}" has ended: its lock is given back`, {
        job: this.name,
      });
    if (this.#controller === undefined) this.#abortedWith ??= reason;
    else this.abort(reason());
  }

  /** The reason `abort` was given before anyone read `signal`, made now if it was the end's. */
  #reasonBeforeSignal(): GuardError | undefined {
    if (typeof this.#abortedWith === 'function') this.#abortedWith = this.#abortedWith();
    return this.#abortedWith;
  }

  #stopTimers(): void {
    this.#stopped = true;
    this.#disarm();
    clearTimeout(this.#keepAliveTimer);
    keptAlive.delete(this);
  }

  #arm(): void {
    this.#disarm();
    const remaining = this.deadline - performance.now();
    if (remaining <= 0) {
      this.#controller?.abort(
        new GuardError('DEADLINE', `Job "${this.name}" reached its deadline: its lock expires soon`, {
          job: this.name,
        }),
      );
      return;
    }
    this.#timer = setTimeout(() => this.#arm(), Math.min(remaining, MAX_TIMER_MS));
    this.#timer.unref();
    armedSignals.add(this);
  }

  #disarm(): void {
    clearTimeout(this.#timer);
    armedSignals.delete(this);
  }

  /** Keep-alive: extend every interval; after a failure, try again sooner while the lock lasts. */
  #scheduleKeepAlive(delayMs: number): void {
    this.#keepAliveTimer = setTimeout(
      () => {
        this.extend().then(
          (extended) => {
            if (this.#stopped) return;
            const interval = this.#job.keepAliveIntervalMs ?? delayMs;
            if (extended) this.#scheduleKeepAlive(interval);
            else if (performance.now() < this.#lockExpiresAt) this.#scheduleKeepAlive(Math.min(interval, KEEP_ALIVE_RETRY_MS));
          },
          () => undefined,
        );
        // An interval longer than a timer can wait (lockAtMostFor over 74 days) extends sooner: harmless.
      },
      Math.min(delayMs, MAX_TIMER_MS),
    );
    this.#keepAliveTimer.unref();
  }
}

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
