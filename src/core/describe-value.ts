import { inspect } from 'node:util';

/** How a received option value is shown in a `TypeError` message: strings quoted, the rest inspected. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  return inspect(value, { depth: 1, breakLength: Infinity });
}
