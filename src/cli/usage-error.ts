import { printable } from './format.js';

/** A command line the CLI refuses (a bad flag value, an unknown job): exit 2 with its message. */
export class UsageError extends Error {}

/**
 * The message on stderr, its lines as lines. Other control characters are written as escapes:
 * whatever a message quotes (a job name, a driver's text) must not reach the terminal raw; the
 * CLI escapes a job name's newlines itself where it quotes one.
 */
export function fail(message: string): number {
  process.stderr.write(`cronguard: ${message.split('\n').map(printable).join('\n')}\n`);
  return 2;
}
