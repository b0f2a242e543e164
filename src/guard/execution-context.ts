import { GuardError } from './errors.js';
import type { ResolvedJob } from './job-options.js';

/** What a guarded job receives. */
export interface ExecutionContext {
  /** The job's name. */
  readonly name: string;
  /** The nominal scheduled time this run is for, or null for an unscheduled call. */
  readonly slot: Date | null;
  /**
   * Aborts a stop margin before the lock can expire (reason: a `GuardError` of code `DEADLINE`),
   * counted on the monotonic clock from just before the acquire was sent, so that it fires before
   * any other replica can take the lock; or when the guard shuts down (code `SHUTDOWN`). Long jobs
   * should check it and stop.
   */
  readonly signal: AbortSignal;
}

/** setTimeout's largest delay; longer deadlines re-arm. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * The context of one execution. The deadline timer is made only when the job reads `signal`, so
 * that jobs that never look at it cost nothing on the hot path.
 */
export class Execution implements ExecutionContext {
  readonly name: string;
  readonly slot: Date | null;
  /** performance.now() at which the signal fires. */
  readonly deadline: number;
  #controller: AbortController | undefined;
  #timer: NodeJS.Timeout | undefined;
  #ended = false;
  /** Set by `abort` before anyone read `signal`. */
  #abortedWith: GuardError | undefined;

  constructor(job: ResolvedJob, slot: Date | null, acquireSentAt: number) {
    this.name = job.name;
    this.slot = slot;
    this.deadline = acquireSentAt + job.lockAtMostForMs - job.stopMarginMs;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#abortedWith !== undefined) this.#controller.abort(this.#abortedWith);
      else if (!this.#ended) this.#arm();
    }
    return this.#controller.signal;
  }

  /** Asks the job to stop now (the guard is shutting down). */
  abort(reason: GuardError): void {
    if (this.#controller === undefined) this.#abortedWith = reason;
    else this.#controller.abort(reason);
    this.end();
  }

  /** Stops the deadline timer once the job has returned. */
  end(): void {
    this.#ended = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }

  #arm(): void {
    const remaining = this.deadline - performance.now();
    if (remaining <= 0) {
      this.#controller?.abort(
        new GuardError('DEADLINE', `Job "${this.name}" reached its deadline: its lock expires soon`, { job: this.name }),
      );
      return;
    }
    this.#timer = setTimeout(() => this.#arm(), Math.min(remaining, MAX_TIMER_MS));
    this.#timer.unref();
  }
}
