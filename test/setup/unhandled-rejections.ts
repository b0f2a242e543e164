// Fails the test during which any promise rejection went unhandled: the guard promises none, on any path.
import { afterEach, expect } from 'vitest';

// A worker that runs several files (the `suite` project does not isolate them) runs this file before
// each one: the listener and what it collects are the process's, added once.
const key = Symbol.for('cronguard.test.unhandledRejections');
const registry = globalThis as { [key]?: unknown[] };
const unhandled: unknown[] = registry[key] ?? [];
if (registry[key] === undefined) {
  registry[key] = unhandled;
  process.on('unhandledRejection', (reason) => void unhandled.push(reason));
}

afterEach(() => {
  const seen = unhandled.splice(0);
  expect(seen, 'unhandled rejections during this test').toEqual([]);
});
