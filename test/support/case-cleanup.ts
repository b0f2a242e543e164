import { AsyncLocalStorage } from 'node:async_hooks';
import { afterEach } from 'vitest';

/** Closes one thing a test opened (a guard, a server). */
export type Close = () => Promise<unknown>;

/** The closes of the concurrent case running here (`withOwnCleanup`), if any. */
const ownCleanup = new AsyncLocalStorage<Close[]>();
/** The closes of the tests that run one at a time. */
const ofTheTest: Close[] = [];

async function closeAll(closes: Close[]): Promise<void> {
  await Promise.all(closes.splice(0).map((close) => close()));
}

afterEach(() => closeAll(ofTheTest));

/**
 * Closes what a test opened once the test ends: after it (an `afterEach`), or, inside
 * `withOwnCleanup`, when that case ends. In concurrent tests (`eachDialectAtOnce`) an `afterEach`
 * runs as each test ends, and would close what the tests still running beside it opened.
 */
export function closeWhenTestEnds(close: Close): void {
  (ownCleanup.getStore() ?? ofTheTest).push(close);
}

/** Runs `run`, then closes what it registered with `closeWhenTestEnds` (through any await), and that only. */
export async function withOwnCleanup<T>(run: () => Promise<T>): Promise<T> {
  const closes: Close[] = [];
  try {
    return await ownCleanup.run(closes, run);
  } finally {
    await closeAll(closes);
  }
}
