// Scenario 6, bad input: table prefixes, property-based (no database: a guard connects at its first
// statement). Identifiers are accepted; anything else is a TypeError naming the value.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  expectTypeError,
  failureOf,
  insertAt,
  isValidPrefix,
  MAX_PREFIX_LENGTH,
  PREFIX_ERROR,
  withGuard,
  badInput,
} from './support/bad-input-rules.js';

const DATABASES = [
  { name: 'sqlite', url: 'sqlite::memory:', supportsSchemas: false },
  { name: 'postgres', url: 'postgres://u@127.0.0.1:9/x', supportsSchemas: true },
  { name: 'mysql', url: 'mysql://u@127.0.0.1:9/x', supportsSchemas: false },
] as const;

const identifiers = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,39}$/);
const BAD_CHARACTERS = [' ', '-', '.', "'", '"', '`', ';', '$', '#', '\0', '\n', 'é', '🦀', '(', ')', '*', '/', '\\', '[', ']'];

function invalidPrefixes(supportsSchemas: boolean): fc.Arbitrary<unknown> {
  const strings = fc.oneof(
    fc.constantFrom(
      '',
      'x; DROP TABLE y',
      'x"; DROP TABLE y; --',
      "x'",
      'a b',
      'a-b',
      'a.b.c',
      '.a',
      'a.',
      '..',
      '"quoted"',
      '`x`',
      '[x]',
      'x$',
      'cronguard_ ',
      ' cronguard_',
      'é',
      '1abc',
      '9',
      `a${'b'.repeat(MAX_PREFIX_LENGTH)}`,
      'cronguard_;',
      'cronguard_\0',
    ),
    fc.string(),
    fc.string({ unit: 'binary', maxLength: 8 }),
    // A valid identifier with one bad character somewhere.
    fc.tuple(identifiers, fc.nat(), fc.constantFrom(...BAD_CHARACTERS)).map(([id, at, bad]) => insertAt(id, at, bad)),
    // A leading digit.
    fc.stringMatching(/^[0-9][A-Za-z0-9_]{0,39}$/),
    // Longer than 40 characters.
    fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{40,60}$/),
    // schema.prefix, with one part invalid (or on a dialect without schemas).
    fc.tuple(identifiers, fc.oneof(identifiers, fc.string({ maxLength: 6 }))).map(([a, b]) => `${a}.${b}`),
    fc.tuple(identifiers, identifiers, identifiers).map(([a, b, c]) => `${a}.${b}.${c}`),
  );
  return fc.oneof(
    { weight: 5, arbitrary: strings.filter((text) => !isValidPrefix(text, supportsSchemas)) },
    { weight: 1, arbitrary: fc.anything().filter((value) => typeof value !== 'string' && value !== undefined) },
    {
      weight: 1,
      arbitrary: fc.constantFrom<unknown>(null, 0, 42, true, ['cronguard_'], { prefix: 'x' }, new String('cronguard_')),
    },
  );
}

describe.each(DATABASES)('bad input: table prefixes on $name', (database) => {
  it('accepts identifiers of up to 40 characters', async () => {
    await badInput(database.name, 'accepts identifiers of up to 40 characters', async (count) => {
      await fc.assert(
        fc.asyncProperty(identifiers, async (tablePrefix) => {
          count();
          const error = await failureOf(() => withGuard(() => undefined, { database: database.url, tablePrefix }));
          expect(error).toBeUndefined();
        }),
        { numRuns: 60, examples: [['_'], ['a'.repeat(MAX_PREFIX_LENGTH)], ['cronguard_'], ['Z9']] },
      );
    });
  });

  it.skipIf(!database.supportsSchemas)('accepts schema.prefix', async () => {
    await badInput(database.name, 'accepts schema.prefix', async (count) => {
      await fc.assert(
        fc.asyncProperty(identifiers, identifiers, async (schema, prefix) => {
          count();
          const error = await failureOf(() => withGuard(() => undefined, { database: database.url, tablePrefix: `${schema}.${prefix}` }));
          expect(error).toBeUndefined();
        }),
        { numRuns: 40 },
      );
    });
  });

  it('throws a TypeError for anything else, naming the value', async () => {
    await badInput(database.name, 'throws a TypeError for anything else, naming the value', async (count) => {
      await fc.assert(
        fc.asyncProperty(invalidPrefixes(database.supportsSchemas), async (tablePrefix) => {
          count();
          const error = await failureOf(() => withGuard(() => undefined, { database: database.url, tablePrefix: tablePrefix as string }));
          const typeError = expectTypeError(error, PREFIX_ERROR);
          if (typeof tablePrefix === 'string') expect(typeError.message.endsWith(`got ${JSON.stringify(tablePrefix)}`)).toBe(true);
        }),
        {
          numRuns: 200,
          examples: [['x; DROP TABLE y'], [database.supportsSchemas ? 'a.b.c' : 'a.b'], ['a'.repeat(MAX_PREFIX_LENGTH + 1)], ['1a']],
        },
      );
    });
  });
});
