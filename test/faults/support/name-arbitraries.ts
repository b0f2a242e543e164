// fast-check arbitraries of job names: valid ones full of quotes, injections and emoji.
import fc from 'fast-check';
import { codePoints, isValidName, MAX_NAME_CODE_POINTS } from './bad-input-rules.js';

/** Any Unicode scalar value but NUL (astral ones included; lone surrogates never). */
export const anyCodePoint = fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => c !== '\0');

/** Pieces that have broken SQL, escaping, collations or encodings somewhere. */
export function trickyPieces(prefix: string): fc.Arbitrary<string> {
  return fc.constantFrom(
    "'",
    '"',
    '`',
    '\\',
    '\\\\',
    "\\'",
    "''",
    '%',
    '_',
    ';',
    '--',
    '/*',
    '*/',
    '#',
    '$1',
    '?',
    ':name',
    '$$',
    '\\0',
    '\\x00',
    'SELECT',
    'DROP TABLE',
    'NULL',
    'null',
    ' OR 1=1',
    'TRUE',
    `x'); DROP TABLE ${prefix}locks; --`,
    `x"); DROP TABLE ${prefix}runs; --`,
    `x'); DROP TABLE ${prefix}canary; --`,
    `'; DELETE FROM ${prefix}locks WHERE '1'='1`,
    `\\'; UPDATE ${prefix}locks SET token = NULL; -- `,
    `' UNION SELECT name FROM ${prefix}locks --`,
    "'; SELECT pg_sleep(5); --",
    '🦀',
    '👨‍👩‍👧‍👦',
    '🏳️‍🌈',
    '\u{1F600}',
    '\u{10FFFF}',
    '\u{E0001}',
    '\u{1D11E}',
    'e\u0301',
    '\u0301',
    'n\u0303\u0323',
    '\u200B',
    '\u200D',
    '\uFEFF',
    '\u00A0',
    '\u3000',
    '\u2028',
    ' ',
    '  ',
    '\t',
    '\n',
    '\r\n',
    '\v',
    '\f',
    'İ',
    'ı',
    'ß',
    'ẞ',
    'ǅ',
    'Σ',
    'ς',
    'ﬀ',
    'Å',
    'Å',
    '漢字',
    'עברית',
    'العربية',
    '\uFFFD',
    '\uFFFE',
    '\uFFFF',
    '\u0001',
    '\u001F',
    '\u007F',
    '\u0080',
  );
}

export const edgeWhitespace = fc.constantFrom('', '', ' ', '  ', '\t', '\n', '\u00A0', '\u3000');
export const fillers = fc.constantFrom('a', 'Z', ' ', "'", '\\', '%', 'é', '漢', '🦀', '\u{10FFFF}', '\u0301');

/** `text` cut or padded with `filler` to exactly `length` code points. */
export function toLength(text: string, length: number, filler: string): string {
  const points = codePoints(text).slice(0, length);
  while (points.length < length) points.push(filler);
  return points.join('');
}

/** Valid names: 1 to 255 code points, well-formed, no NUL, often full of quotes, injections and emoji. */
export function validNames(prefix: string): fc.Arbitrary<string> {
  const piece = fc.oneof(
    { weight: 3, arbitrary: trickyPieces(prefix) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) },
    { weight: 1, arbitrary: fc.string({ unit: anyCodePoint, maxLength: 6 }) },
  );
  const body = fc.array(piece, { minLength: 1, maxLength: 10 }).map((pieces) => pieces.join(''));
  const padded = fc
    .tuple(edgeWhitespace, body, edgeWhitespace)
    .map(([before, text, after]) => codePoints(`${before}${text}${after}`).slice(0, MAX_NAME_CODE_POINTS).join(''));
  const exactlyMax = fc.tuple(body, fillers).map(([text, filler]) => toLength(text, MAX_NAME_CODE_POINTS, filler));
  return fc.oneof({ weight: 4, arbitrary: padded }, { weight: 1, arbitrary: exactlyMax }).filter(isValidName);
}

/** Names that differ from `name` only by case or by trailing/leading space, when they are valid. */
export function neighbours(name: string): string[] {
  return [name.toUpperCase(), name.toLowerCase(), `${name} `, name.trimEnd(), ` ${name}`].filter(isValidName);
}
