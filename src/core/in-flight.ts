import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_TIMER_MS } from './timeout.js';

/** The work a guard has under way (runs, and locks a node-cron coordinator holds), for shutdown. */
export class InFlight {
  readonly #pending = new Set<Promise<unknown>>();

  /** Tracks `work` until it settles, and returns it. */
  track<T>(work: Promise<T>): Promise<T> {
    this.#pending.add(work);
    const forget = (): void => void this.#pending.delete(work);
    work.then(forget, forget);
    return work;
  }

  get size(): number {
    return this.#pending.size;
  }

  /** Waits until nothing is under way, or `timeoutMs`; resolves with how many are still pending. */
  async drain(timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    while (this.#pending.size > 0) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) break;
      const timer = sleep(Math.min(remaining, MAX_TIMER_MS), undefined, { ref: false });
      await Promise.race([Promise.allSettled([...this.#pending]), timer]);
    }
    return this.#pending.size;
  }
}
