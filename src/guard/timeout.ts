/** setTimeout's largest delay (Node turns a larger one into 1 ms); longer waits are capped or re-armed. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** What `withTimeout` resolves with when the time is up first. */
export const TIMED_OUT = Symbol('timed out');

/**
 * `work`, or TIMED_OUT after `ms`, whichever comes first. `work` goes on after a timeout: the caller
 * decides what to do when it settles late.
 */
export function withTimeout<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), Math.min(ms, MAX_TIMER_MS));
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
