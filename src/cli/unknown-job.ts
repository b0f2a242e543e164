import type { Guard } from '../guard/create-guard.js';
import { UsageError } from './usage-error.js';
import { printable } from './format.js';

/** How many near names a typo's message offers. */
const NEAREST = 3;

/** The edit distance of two names (insertions, deletions, substitutions), case-insensitively. */
function distance(a: string, b: string): number {
  const left = a.toLowerCase();
  const right = b.toLowerCase();
  let previous = Array.from({ length: right.length + 1 }, (_, index) => index);
  for (let i = 1; i <= left.length; i++) {
    const current = [i];
    for (let j = 1; j <= right.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (left[i - 1] === right[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[right.length] ?? 0;
}

/** The known names nearest to `name`: by edit distance, then alphabetically; at most NEAREST. */
export function nearestNames(name: string, known: Iterable<string>): string[] {
  return [...new Set(known)]
    .map((candidate) => ({ candidate, cost: distance(name, candidate) }))
    .sort((a, b) => a.cost - b.cost || (a.candidate < b.candidate ? -1 : 1))
    .slice(0, NEAREST)
    .map(({ candidate }) => candidate);
}

/** The usage error (exit 2) for a --job the tables have never seen, with the nearest names they have. */
export function unknownJobError(job: string, known: Iterable<string>): UsageError {
  const nearest = nearestNames(job, known);
  const hint =
    nearest.length === 0 ? 'the tables have no job yet' : `nearest known: ${nearest.map((name) => `"${printable(name)}"`).join(', ')}`;
  return new UsageError(`--job "${printable(job)}": no such job (no lock row, no declared schedule, no run); ${hint}`);
}

/**
 * Every job name the tables know, read only when a --job found nothing: the lock rows (every job
 * that ever ran, was paused or triggered) and the declared schedules (from a one-minute ledger,
 * which lists each of them and reads next to no runs).
 */
export async function knownJobNames(guard: Guard): Promise<string[]> {
  const [locks, ledgers] = await Promise.all([guard.locks(), guard.slots({ since: '1m' })]);
  return [...locks.map((lock) => lock.name), ...ledgers.map((ledger) => ledger.job)];
}

/** Throws `unknownJobError` when `job` is not among the names the tables know. */
export async function assertKnownJob(guard: Guard, job: string): Promise<void> {
  const known = await knownJobNames(guard);
  if (!known.includes(job)) throw unknownJobError(job, known);
}
