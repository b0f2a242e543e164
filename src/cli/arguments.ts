import { hostname, userInfo } from 'node:os';
import { printable } from './format.js';
import type { Guard } from '../guard/create-guard.js';

/** A command line the CLI refuses (a bad flag value, an unknown job): exit 2 with its message. */
export class UsageError extends Error {}

/**
 * What a command line is run with: where its output and its errors go, and the environment it reads
 * its database URL from. The `cronguard` bin gives its own process's (`processIO`); a program or a
 * test can run a command line in its own process with others.
 */
export interface CliIO {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The running process's stdout, stderr and environment. */
export const processIO: CliIO = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  env: process.env,
};

/**
 * The message on stderr, its lines as lines. Other control characters are written as escapes:
 * whatever a message quotes (a job name, a driver's text) must not reach the terminal raw; the
 * CLI escapes a job name's newlines itself where it quotes one.
 */
export function fail(io: CliIO, message: string): number {
  io.stderr(`cronguard: ${message.split('\n').map(printable).join('\n')}\n`);
  return 2;
}

/** Who the CLI records as having made a change, without --by: the user on this host. */
export function defaultActor(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    // No user entry (a container running under an unnamed uid).
    return `cli@${hostname()}`;
  }
}

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

/** Edit distance (insertions, deletions, substitutions, and swaps of two neighbours), for "did you mean". */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      const row = rows[i];
      if (row !== undefined) row[j] = best;
    }
  }
  return at(a.length, b.length);
}

interface Ranked {
  readonly candidate: string;
  readonly distance: number;
  /** Within a third of the name's length in edits (at least 2), or containing it, or contained in it. */
  readonly near: boolean;
}

function ranked(name: string, known: Iterable<string>): Ranked[] {
  const wanted = name.toLowerCase();
  const within = Math.max(2, Math.floor(wanted.length / 3));
  return [...new Set(known)]
    .filter((candidate) => candidate !== name)
    .map((candidate) => {
      const lower = candidate.toLowerCase();
      const distance = editDistance(wanted, lower);
      const related = wanted.length >= 3 && (lower.includes(wanted) || wanted.includes(lower));
      return { candidate, distance, near: distance <= within || related };
    })
    .sort((a, b) => a.distance - b.distance || (a.candidate < b.candidate ? -1 : 1));
}

/** The known names closest to `name`, nearest first, at most `limit`, however far. */
export function closestNames(name: string, known: Iterable<string>, limit = 3): string[] {
  return ranked(name, known)
    .slice(0, limit)
    .map((entry) => entry.candidate);
}

/** `closestNames`, only those near enough to be a typo of it. */
export function nearestNames(name: string, known: Iterable<string>, limit = 3): string[] {
  return ranked(name, known)
    .filter((entry) => entry.near)
    .slice(0, limit)
    .map((entry) => entry.candidate);
}

/** ` Did you mean "a" or "b"?`, or '' when nothing is near. */
export function didYouMean(name: string, known: readonly string[], quote: (value: string) => string = (v) => `"${v}"`): string {
  const near = nearestNames(name, known);
  if (near.length === 0) return '';
  const listed = near.map(quote);
  return ` Did you mean ${listed.length === 1 ? listed[0] : `${listed.slice(0, -1).join(', ')} or ${listed.at(-1)}`}?`;
}

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
