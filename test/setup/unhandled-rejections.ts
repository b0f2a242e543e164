// Fails the test during which any promise rejection went unhandled: the guard promises none, on any path.
import { afterEach, expect } from 'vitest';

const unhandled: unknown[] = [];
process.on('unhandledRejection', (reason) => void unhandled.push(reason));

afterEach(() => {
  const seen = unhandled.splice(0);
  expect(seen, 'unhandled rejections during this test').toEqual([]);
});
