/** setTimeout's largest delay (Node turns a larger one into 1 ms); longer waits are capped or re-armed. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** What `withTimeout` resolves with when the time is up first. */
export const TIMED_OUT = Symbol('timed out');

/**
 * A lock statement's answer, or TIMED_OUT after the guard's acquireTimeout. A synchronous store's
 * answer is there before any timer could fire, so it gets none.
 */
export function statementAnswer<T>(store: { readonly synchronous: boolean }, work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  return store.synchronous ? work : withTimeout(work, ms);
}

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
