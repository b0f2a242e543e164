import { messageOf } from './errors.js';

/** The longest error text kept in the history, in characters (code points). */
export const MAX_ERROR_LENGTH = 4_096;

/** NUL, and a UTF-16 surrogate that is not half of a pair. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The job's error as history keeps it: its message (see `messageOf`, which never throws), made
 * storable. Never throws, whatever the job threw.
 */
export function errorText(error: unknown): string {
  return storableText(messageOf(error));
}

/**
 * Text that every dialect stores as is: at most 4,096 characters, never cutting a surrogate pair,
 * with NUL (which PostgreSQL's text refuses: `invalid byte sequence for encoding "UTF8": 0x00`)
 * and lone surrogates (not Unicode: no UTF-8 encodes them) replaced by U+FFFD.
 */
export function storableText(text: string): string {
  // Two UTF-16 units per character at most: a message of megabytes is cut before it is scanned.
  // A pair the cut splits leaves a lone surrogate past the 4,096th character, which goes below.
  const head = text.length <= 2 * MAX_ERROR_LENGTH ? text : text.slice(0, 2 * MAX_ERROR_LENGTH);
  const clean = head.replace(UNSTORABLE, '\uFFFD');
  if (clean.length <= MAX_ERROR_LENGTH) return clean;
  const characters = Array.from(clean);
  return characters.length <= MAX_ERROR_LENGTH ? clean : characters.slice(0, MAX_ERROR_LENGTH).join('');
}
