// The rules of bad input as the README states them, written independently of src/ (the oracles of
// the bad-input scenarios), and the assertions they share.
import { Buffer } from 'node:buffer';
import { inspect } from 'node:util';
import { expect } from 'vitest';
import { createGuard, type Guard, type GuardOptions } from '../../../src/index.js';
import { scenario } from './scenario.js';

export const MAX_NAME_CODE_POINTS = 255;
export const MAX_DURATION_MS = 3_650 * 86_400_000;
export const MAX_PREFIX_LENGTH = 40;
export const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export type Unit = keyof typeof UNIT_MS;
export const UNITS = Object.keys(UNIT_MS) as Unit[];
export const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const NAME_ERROR = 'Expected `name` to be a string of 1 to 255 characters';
export const PREFIX_ERROR = 'Expected `tablePrefix` to be an identifier';

export const codePoints = (text: string): string[] => Array.from(text);

/** README: 1 to 255 characters (code points) of any Unicode except NUL. */
export function isValidName(value: unknown): value is string {
  if (typeof value !== 'string' || !value.isWellFormed() || value.includes('\0')) return false;
  const length = codePoints(value).length;
  return length >= 1 && length <= MAX_NAME_CODE_POINTS;
}

/** README: an identifier of at most 40 characters, or `schema.prefix` on PostgreSQL. */
export function isValidPrefix(value: string, supportsSchemas: boolean): boolean {
  const identifier = (part: string): boolean => IDENTIFIER.test(part) && part.length <= MAX_PREFIX_LENGTH;
  const parts = value.split('.');
  if (parts.length === 1) return identifier(value);
  return supportsSchemas && parts.length === 2 && parts.every(identifier);
}

/** How an error message shows the value it got: strings JSON-quoted, the rest inspected. */
export function shown(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : inspect(value, { depth: 1, breakLength: Infinity });
}

export const hex = (text: string): string => Buffer.from(text, 'utf8').toString('hex').toUpperCase();

/** The error a call throws or rejects with, or undefined when it succeeds. */
export async function failureOf(call: () => unknown): Promise<unknown> {
  try {
    await call();
    return undefined;
  } catch (error) {
    return error;
  }
}

export function failureOfSync(call: () => unknown): unknown {
  try {
    call();
    return undefined;
  } catch (error) {
    return error;
  }
}

export function expectTypeError(error: unknown, start: string): TypeError {
  expect(error).toBeInstanceOf(TypeError);
  const message = (error as TypeError).message;
  expect(message.startsWith(start), `message ${JSON.stringify(message)} should start with ${JSON.stringify(start)}`).toBe(true);
  return error as TypeError;
}

/** A guard that never connects (nothing is opened before the first statement), closed after `use`. */
export async function withGuard<T>(use: (guard: Guard) => T | Promise<T>, options: Partial<GuardOptions> = {}): Promise<T> {
  const guard = createGuard({ database: 'sqlite::memory:', telemetry: false, ...options });
  try {
    return await use(guard);
  } finally {
    await guard.close();
  }
}

/** Inserts `insert` into `text` at a code-point boundary. */
export function insertAt(text: string, index: number, insert: string): string {
  const points = codePoints(text);
  const at = index % (points.length + 1);
  return [...points.slice(0, at), insert, ...points.slice(at)].join('');
}

/**
 * A bad-input property as a scenario of RELIABILITY.md: `count` is called once per generated input,
 * and any counterexample fails the scenario (fast-check throws it).
 */
export async function badInput(dialect: string, done: string, body: (count: () => void) => Promise<void>): Promise<void> {
  await scenario('bad-input', dialect, async () => {
    let inputs = 0;
    await body(() => void (inputs += 1));
    return { done, times: inputs, lost: {} };
  });
}
