// Scenario 6, bad input: job names, property-based. Valid names run on every dialect and come back
// byte-exact; invalid ones are TypeErrors naming the value. Runs are bounded.
import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dialectTargets } from '../support/dialects.js';
import { migratedGuard } from '../support/guards.js';
import { openRaw, type RawDatabase } from '../support/raw-database.js';
import {
  expectTypeError,
  failureOf,
  hex,
  insertAt,
  isValidName,
  MAX_NAME_CODE_POINTS,
  NAME_ERROR,
  withGuard,
  badInput,
} from './support/bad-input-rules.js';
import { fillers, neighbours, toLength, validNames } from './support/name-arbitraries.js';

async function tablesPresent(raw: RawDatabase, dialect: string, tables: string[]): Promise<string[]> {
  const marks = tables.map(() => '?').join(', ');
  const sql =
    dialect === 'sqlite'
      ? `SELECT name AS t FROM sqlite_master WHERE type = 'table' AND name IN (${marks})`
      : dialect === 'postgres'
        ? `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN (${marks})`
        : `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN (${marks})`;
  const rows = await raw.query<{ t: string }>(sql, tables);
  return rows.map((row) => row.t).sort();
}

/** The stored bytes of every lock name, in upper-case hex, read behind the guard's back. */
async function storedNameBytes(raw: RawDatabase, dialect: string, table: string): Promise<string[]> {
  const column =
    dialect === 'postgres' ? "upper(encode(convert_to(name, 'UTF8'), 'hex'))" : dialect === 'mysql' ? 'HEX(name)' : 'hex(name)';
  const rows = await raw.query<{ bytes: string }>(`SELECT ${column} AS bytes FROM ${table}`);
  return rows.map((row) => row.bytes).sort();
}

describe.each(dialectTargets())('bad input: job names on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('runs every valid name, returns it byte-exact from locks() and history(), keeps case and space variants apart, and leaves the schema intact', async () => {
      await badInput(
        target.name,
        'runs every valid name, returns it byte-exact from locks() and history(), keeps case and space variants apart, and leaves the schema intact',
        async (count) => {
          const { guard, url, prefix } = await migratedGuard(target);
          const tables = [`${prefix}canary`, `${prefix}locks`, `${prefix}migrations`, `${prefix}runs`];
          const raw = await openRaw(target.name, url);
          try {
            await raw.exec(`CREATE TABLE ${prefix}canary (id INTEGER PRIMARY KEY)`);
            await raw.exec(`INSERT INTO ${prefix}canary (id) VALUES (1)`);
            /** How many times each name ran. */
            const runs = new Map<string, number>();

            const property = fc.asyncProperty(validNames(prefix), async (name) => {
              count();
              const names = [...new Set([name, ...neighbours(name)])];
              for (const job of names) {
                let seen: string | undefined;
                const result = await guard.run({ name: job, lockAtMostFor: '1m' }, (ctx) => {
                  seen = ctx.name;
                  return job;
                });
                expect(result).toEqual({ executed: true, value: job });
                expect(seen).toBe(job);
                runs.set(job, (runs.get(job) ?? 0) + 1);
              }
              const locks = await guard.locks();
              for (const job of names) {
                const matching = locks.filter((lock) => lock.name === job);
                expect(matching, `one lock row for ${JSON.stringify(job)}`).toHaveLength(1);
                expect(Buffer.from(matching[0]?.name ?? '', 'utf8')).toEqual(Buffer.from(job, 'utf8'));
                const history = await guard.history({ job, limit: 1_000 });
                // Exactly this name's runs: no other name matched the filter (case, trailing space, LIKE).
                expect(history.runs).toHaveLength(runs.get(job) ?? 0);
                for (const run of history.runs) {
                  expect(run.job).toBe(job);
                  expect(Buffer.from(run.job, 'utf8')).toEqual(Buffer.from(job, 'utf8'));
                  expect(run.status).toBe('succeeded');
                }
              }
            });
            await fc.assert(property, {
              numRuns: 50,
              examples: [
                [`x'); DROP TABLE ${prefix}locks; --`],
                ["x'); DROP TABLE t_locks; --"],
                ['job'],
                [' Job \t'],
                ['🦀'.repeat(MAX_NAME_CODE_POINTS)],
                ['\u{10FFFF}'.repeat(MAX_NAME_CODE_POINTS)],
                [`${"'".repeat(100)}${'\\'.repeat(100)}${'"'.repeat(55)}`],
                ['e\u0301'.repeat(127) + 'x'],
              ],
            });

            // The schema is intact: every table is there, the canary too, and there is one lock row per name.
            expect(await tablesPresent(raw, target.name, tables)).toEqual([...tables].sort());
            expect(await raw.query(`SELECT id FROM ${prefix}canary`)).toHaveLength(1);
            const locks = await guard.locks();
            expect(locks).toHaveLength(runs.size);
            expect(locks.map((lock) => lock.name).sort()).toEqual([...runs.keys()].sort());
            expect(await storedNameBytes(raw, target.name, `${prefix}locks`)).toEqual([...runs.keys()].map(hex).sort());
            const [runRows] = await raw.query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${prefix}runs`);
            expect(Number(runRows?.n)).toBe([...runs.values()].reduce((sum, n) => sum + n, 0));
            // And the guard still works on it.
            expect(await guard.run({ name: 'after-the-storm', lockAtMostFor: '1m' }, () => 'ok')).toEqual({
              executed: true,
              value: 'ok',
            });
          } finally {
            await raw.close();
          }
        },
      );
    });
  });
});

const someValidName = validNames('t_');

const invalidNames: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(''),
  // 256 or more code points (of any width: 'a', 'é', '🦀' …).
  fc
    .tuple(someValidName, fc.integer({ min: MAX_NAME_CODE_POINTS + 1, max: 600 }), fillers)
    .map(([name, length, filler]) => toLength(name, length, filler)),
  // NUL somewhere.
  fc.tuple(someValidName, fc.nat(), fc.constantFrom('\0', '\0\0', 'x\0')).map(([name, at, nul]) => insertAt(name, at, nul)),
  fc.constantFrom('\0', 'job\0', '\0job'),
  // A lone surrogate at a code-point boundary: never part of a pair.
  fc
    .tuple(someValidName, fc.nat(), fc.integer({ min: 0xd800, max: 0xdfff }))
    .map(([name, at, unit]) => insertAt(name, at, String.fromCharCode(unit))),
  fc.constantFrom('\uD800', '\uDFFF', 'a\uD83E', '\uDD80b', '🦀'.slice(0, 1)),
  // Not a string.
  fc.anything().filter((value) => typeof value !== 'string'),
  fc.constantFrom<unknown>(
    undefined,
    null,
    0,
    42,
    Number.NaN,
    true,
    1n,
    Symbol('job'),
    ['job'],
    { name: 'job' },
    new String('job'),
    () => 'job',
  ),
);

describe('bad input: invalid job names', () => {
  it('rejects with a TypeError naming `name` and the value, and never runs the job', async () => {
    await badInput('options', 'rejects with a TypeError naming `name` and the value, and never runs the job', async (count) => {
      await withGuard(async (guard) => {
        await fc.assert(
          fc.asyncProperty(invalidNames, async (name) => {
            count();
            expect(isValidName(name)).toBe(false);
            let ran = false;
            const error = await failureOf(() => guard.run({ name: name as string, lockAtMostFor: '1m' }, () => (ran = true)));
            const typeError = expectTypeError(error, NAME_ERROR);
            expect(ran).toBe(false);
            if (typeof name === 'string') expect(typeError.message.endsWith(`got ${JSON.stringify(name)}`)).toBe(true);
            // The same check when options are validated ahead of a run.
            expectTypeError(await failureOf(() => guard.resolveJob({ name: name as string, lockAtMostFor: '1m' })), NAME_ERROR);
          }),
          { numRuns: 300 },
        );
      });
    });
  });

  it('accepts exactly 255 code points and rejects 256, whatever their UTF-16 length', async () => {
    await badInput('options', 'accepts exactly 255 code points and rejects 256, whatever their UTF-16 length', async (count) => {
      await withGuard(async (guard) => {
        await fc.assert(
          fc.asyncProperty(someValidName, fillers, async (name, filler) => {
            count();
            const max = toLength(name, MAX_NAME_CODE_POINTS, filler);
            expect(guard.resolveJob({ name: max, lockAtMostFor: '1m' }).name).toBe(max);
            expectTypeError(await failureOf(() => guard.resolveJob({ name: `${max}${filler}`, lockAtMostFor: '1m' })), NAME_ERROR);
          }),
          { numRuns: 100 },
        );
      });
    });
  });
});
