import { printable } from './format.js';
import { UsageError } from './usage-error.js';

/**
 * A time flag's value: an ISO time (2026-12-01T18:00:00Z) as a Date, else the duration as given
 * (2h, 30m), which the API reads from now (`pause --until`) or back from now (`slots --since`).
 */
export function timeArgument(value: string, flag: string): Date | string {
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const at = new Date(value);
    if (Number.isNaN(at.getTime())) throw new UsageError(`${flag} expects a duration such as 2h or an ISO time, got "${printable(value)}"`);
    return at;
  }
  return value;
}
