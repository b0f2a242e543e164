import type { Guard } from '../guard/create-guard.js';
import { UsageError } from './usage-error.js';
import { printable } from './format.js';
import { closestNames } from './nearest-names.js';

/** The usage error (exit 2) for a --job the tables have never seen, with the nearest names they have. */
export function unknownJobError(job: string, known: Iterable<string>): UsageError {
  const nearest = closestNames(job, known);
  const hint =
    nearest.length === 0 ? 'the tables have no job yet' : `nearest known: ${nearest.map((name) => `"${printable(name)}"`).join(', ')}`;
  return new UsageError(`--job "${printable(job)}": no such job (no lock row, no declared schedule, no run); ${hint}`);
}

/** Throws `unknownJobError` when `job` is not among the names the tables know. */
export async function assertKnownJob(guard: Guard, job: string): Promise<void> {
  // Every job name the tables know (lock rows and declared schedules), read only when a --job found nothing.
  const known = await guard.jobNames();
  if (!known.includes(job)) throw unknownJobError(job, known);
}
