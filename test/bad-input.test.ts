// Bad input, property-based: job names on every dialect, and durations and table prefixes (no
// database). Runs are bounded so that the whole file stays well under 30 s.
import { Buffer } from 'node:buffer';
import { inspect } from 'node:util';
import fc from 'fast-check';
import { Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import { createGuard, type DurationInput, type Guard, type GuardOptions } from '../src/index.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';

// ---------------------------------------------------------------------------------------------
// The rules as the README states them, written independently of src/ (the oracles of the tests).
// ---------------------------------------------------------------------------------------------

const MAX_NAME_CODE_POINTS = 255;
const MAX_DURATION_MS = 3_650 * 86_400_000;
const MAX_PREFIX_LENGTH = 40;
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
type Unit = keyof typeof UNIT_MS;
const UNITS = Object.keys(UNIT_MS) as Unit[];
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

const NAME_ERROR = 'Expected `name` to be a string of 1 to 255 characters';
const PREFIX_ERROR = 'Expected `tablePrefix` to be an identifier';

const codePoints = (text: string): string[] => Array.from(text);

/** README: 1 to 255 characters (code points) of any Unicode except NUL. */
function isValidName(value: unknown): value is string {
  if (typeof value !== 'string' || !value.isWellFormed() || value.includes('\0')) return false;
  const length = codePoints(value).length;
  return length >= 1 && length <= MAX_NAME_CODE_POINTS;
}

/** README: an identifier of at most 40 characters, or `schema.prefix` on PostgreSQL. */
function isValidPrefix(value: string, supportsSchemas: boolean): boolean {
  const identifier = (part: string): boolean => IDENTIFIER.test(part) && part.length <= MAX_PREFIX_LENGTH;
  const parts = value.split('.');
  if (parts.length === 1) return identifier(value);
  return supportsSchemas && parts.length === 2 && parts.every(identifier);
}

/** How an error message shows the value it got: strings JSON-quoted, the rest inspected. */
function shown(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : inspect(value, { depth: 1, breakLength: Infinity });
}

const hex = (text: string): string => Buffer.from(text, 'utf8').toString('hex').toUpperCase();

/** The error a call throws or rejects with, or undefined when it succeeds. */
async function failureOf(call: () => unknown): Promise<unknown> {
  try {
    await call();
    return undefined;
  } catch (error) {
    return error;
  }
}

function failureOfSync(call: () => unknown): unknown {
  try {
    call();
    return undefined;
  } catch (error) {
    return error;
  }
}

function expectTypeError(error: unknown, start: string): TypeError {
  expect(error).toBeInstanceOf(TypeError);
  const message = (error as TypeError).message;
  expect(message.startsWith(start), `message ${JSON.stringify(message)} should start with ${JSON.stringify(start)}`).toBe(true);
  return error as TypeError;
}

/** A guard that never connects (nothing is opened before the first statement), closed after `use`. */
async function withGuard<T>(use: (guard: Guard) => T | Promise<T>, options: GuardOptions = {}): Promise<T> {
  const guard = createGuard({ database: 'sqlite::memory:', telemetry: false, ...options });
  try {
    return await use(guard);
  } finally {
    await guard.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------

/** Any Unicode scalar value but NUL (astral ones included; lone surrogates never). */
const anyCodePoint = fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => c !== '\0');

/** Pieces that have broken SQL, escaping, collations or encodings somewhere. */
function trickyPieces(prefix: string): fc.Arbitrary<string> {
  return fc.constantFrom(
    "'", '"', '`', '\\', '\\\\', "\\'", "''", '%', '_', ';', '--', '/*', '*/', '#', '$1', '?', ':name', '$$', '\\0', '\\x00',
    'SELECT', 'DROP TABLE', 'NULL', 'null', ' OR 1=1', 'TRUE',
    `x'); DROP TABLE ${prefix}locks; --`,
    `x"); DROP TABLE ${prefix}runs; --`,
    `x'); DROP TABLE ${prefix}canary; --`,
    `'; DELETE FROM ${prefix}locks WHERE '1'='1`,
    `\\'; UPDATE ${prefix}locks SET token = NULL; -- `,
    `' UNION SELECT name FROM ${prefix}locks --`,
    "'; SELECT pg_sleep(5); --",
    '🦀', '👨‍👩‍👧‍👦', '🏳️‍🌈', '\u{1F600}', '\u{10FFFF}', '\u{E0001}', '\u{1D11E}',
    'e\u0301', '\u0301', 'n\u0303\u0323', '\u200B', '\u200D', '\uFEFF', '\u00A0', '\u3000', '\u2028',
    ' ', '  ', '\t', '\n', '\r\n', '\v', '\f',
    'İ', 'ı', 'ß', 'ẞ', 'ǅ', 'Σ', 'ς', 'ﬀ', 'Å', 'Å', '漢字', 'עברית', 'العربية',
    '\uFFFD', '\uFFFE', '\uFFFF', '\u0001', '\u001F', '\u007F', '\u0080',
  );
}

const edgeWhitespace = fc.constantFrom('', '', ' ', '  ', '\t', '\n', '\u00A0', '\u3000');
const fillers = fc.constantFrom('a', 'Z', ' ', "'", '\\', '%', 'é', '漢', '🦀', '\u{10FFFF}', '\u0301');

/** `text` cut or padded with `filler` to exactly `length` code points. */
function toLength(text: string, length: number, filler: string): string {
  const points = codePoints(text).slice(0, length);
  while (points.length < length) points.push(filler);
  return points.join('');
}

/** Valid names: 1 to 255 code points, well-formed, no NUL, often full of quotes, injections and emoji. */
function validNames(prefix: string): fc.Arbitrary<string> {
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
function neighbours(name: string): string[] {
  return [name.toUpperCase(), name.toLowerCase(), `${name} `, name.trimEnd(), ` ${name}`].filter(isValidName);
}

// ---------------------------------------------------------------------------------------------
// 1. Names on every dialect
// ---------------------------------------------------------------------------------------------

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
      const { guard, url, prefix } = await migratedGuard(target);
      const tables = [`${prefix}canary`, `${prefix}locks`, `${prefix}migrations`, `${prefix}runs`];
      const raw = await openRaw(target.name, url);
      try {
        await raw.exec(`CREATE TABLE ${prefix}canary (id INTEGER PRIMARY KEY)`);
        await raw.exec(`INSERT INTO ${prefix}canary (id) VALUES (1)`);
        /** How many times each name ran. */
        const runs = new Map<string, number>();

        const property = fc.asyncProperty(validNames(prefix), async (name) => {
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
        const [count] = await raw.query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${prefix}runs`);
        expect(Number(count?.n)).toBe([...runs.values()].reduce((sum, n) => sum + n, 0));
        // And the guard still works on it.
        expect(await guard.run({ name: 'after-the-storm', lockAtMostFor: '1m' }, () => 'ok')).toEqual({ executed: true, value: 'ok' });
      } finally {
        await raw.close();
      }
    });
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Invalid names (no database)
// ---------------------------------------------------------------------------------------------

/** Inserts `insert` into `text` at a code-point boundary. */
function insertAt(text: string, index: number, insert: string): string {
  const points = codePoints(text);
  const at = index % (points.length + 1);
  return [...points.slice(0, at), insert, ...points.slice(at)].join('');
}

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
  fc.constantFrom<unknown>(undefined, null, 0, 42, Number.NaN, true, 1n, Symbol('job'), ['job'], { name: 'job' }, new String('job'), () => 'job'),
);

describe('bad input: invalid job names', () => {
  it('rejects with a TypeError naming `name` and the value, and never runs the job', async () => {
    await withGuard(async (guard) => {
      await fc.assert(
        fc.asyncProperty(invalidNames, async (name) => {
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

  it('accepts exactly 255 code points and rejects 256, whatever their UTF-16 length', async () => {
    await withGuard(async (guard) => {
      await fc.assert(
        fc.asyncProperty(someValidName, fillers, async (name, filler) => {
          const max = toLength(name, MAX_NAME_CODE_POINTS, filler);
          expect(guard.resolveJob({ name: max, lockAtMostFor: '1m' }).name).toBe(max);
          expectTypeError(await failureOf(() => guard.resolveJob({ name: `${max}${filler}`, lockAtMostFor: '1m' })), NAME_ERROR);
        }),
        { numRuns: 100 },
      );
    });
  });
});

// ---------------------------------------------------------------------------------------------
// 3. Durations (no database)
// ---------------------------------------------------------------------------------------------

/** A duration input and the milliseconds it means; `exact` false when decimals round in floating point. */
interface DurationCase {
  readonly input: DurationInput;
  readonly ms: number;
  readonly exact: boolean;
}

const unit = fc.constantFrom(...UNITS);

/** `${n}${unit}` with an integer n, sometimes with leading zeros, from `min` units to the maximum. */
function shortIntegers(min: number): fc.Arbitrary<DurationCase> {
  return fc
    .tuple(unit, fc.nat({ max: 3 }))
    .chain(([u, zeros]) =>
      fc.integer({ min, max: Math.floor(MAX_DURATION_MS / UNIT_MS[u]) }).map((n) => ({
        input: `${'0'.repeat(zeros)}${n}${u}`,
        ms: n * UNIT_MS[u],
        exact: true,
      })),
    );
}

/** `${n}.${digits}${unit}`, such as '1.5s'. */
const shortDecimals: fc.Arbitrary<DurationCase> = fc
  .tuple(unit, fc.stringMatching(/^\d{1,4}$/))
  .chain(([u, digits]) =>
    fc.integer({ min: 0, max: Math.floor(MAX_DURATION_MS / UNIT_MS[u]) - 1 }).map((n) => ({
      input: `${n}.${digits}${u}`,
      ms: (n + Number(`0.${digits}`)) * UNIT_MS[u],
      exact: false,
    })),
  );

/** ISO 8601 durations; calendar units by luxon's casual conversion (a year 365 days, a month 30). */
const isoDurations: fc.Arbitrary<DurationCase> = fc
  .record(
    {
      Y: fc.integer({ min: 0, max: 9 }),
      M: fc.integer({ min: 0, max: 11 }),
      W: fc.integer({ min: 0, max: 60 }),
      D: fc.integer({ min: 0, max: 400 }),
      H: fc.integer({ min: 0, max: 48 }),
      Min: fc.integer({ min: 0, max: 120 }),
      S: fc.integer({ min: 0, max: 4_000 }),
      fraction: fc.stringMatching(/^\d{3}$/),
    },
    { requiredKeys: [] },
  )
  .filter((parts) => [parts.Y, parts.M, parts.W, parts.D, parts.H, parts.Min, parts.S].some((n) => n !== undefined))
  .map((parts) => {
    const date = `${parts.Y === undefined ? '' : `${parts.Y}Y`}${parts.M === undefined ? '' : `${parts.M}M`}${
      parts.W === undefined ? '' : `${parts.W}W`
    }${parts.D === undefined ? '' : `${parts.D}D`}`;
    const seconds = parts.S === undefined ? '' : parts.fraction === undefined ? `${parts.S}S` : `${parts.S}.${parts.fraction}S`;
    const time = `${parts.H === undefined ? '' : `${parts.H}H`}${parts.Min === undefined ? '' : `${parts.Min}M`}${seconds}`;
    const days = (parts.Y ?? 0) * 365 + (parts.M ?? 0) * 30 + (parts.W ?? 0) * 7 + (parts.D ?? 0);
    const ms =
      days * UNIT_MS.d +
      (parts.H ?? 0) * UNIT_MS.h +
      (parts.Min ?? 0) * UNIT_MS.m +
      (parts.S ?? 0) * UNIT_MS.s +
      (parts.S !== undefined && parts.fraction !== undefined ? Number(parts.fraction) : 0);
    return { input: `P${date}${time === '' ? '' : `T${time}`}`, ms, exact: true };
  });

const luxonDurations: fc.Arbitrary<DurationCase> = fc
  .record({
    days: fc.integer({ min: 0, max: 3_000 }),
    hours: fc.integer({ min: 0, max: 100 }),
    minutes: fc.integer({ min: 0, max: 100 }),
    seconds: fc.integer({ min: 0, max: 100 }),
    milliseconds: fc.integer({ min: 0, max: 10_000 }),
  })
  .map((parts) => ({
    input: Duration.fromObject(parts),
    ms: parts.days * UNIT_MS.d + parts.hours * UNIT_MS.h + parts.minutes * UNIT_MS.m + parts.seconds * UNIT_MS.s + parts.milliseconds,
    exact: true,
  }));

const withinMaximum = (c: DurationCase): boolean => c.ms <= MAX_DURATION_MS;

/** Durations greater than 0 and at most ten years: valid everywhere, `lockAtMostFor` included. */
const positiveDurations: fc.Arbitrary<DurationCase> = fc.oneof(
  fc.double({ min: Number.MIN_VALUE, max: MAX_DURATION_MS, noNaN: true }).map((n) => ({ input: n, ms: n, exact: true })),
  fc.integer({ min: 1, max: MAX_DURATION_MS }).map((n) => ({ input: n, ms: n, exact: true })),
  shortIntegers(1),
  shortDecimals.filter((c) => c.ms > 0),
  isoDurations.filter((c) => c.ms > 0 && withinMaximum(c)),
  luxonDurations.filter((c) => c.ms > 0),
  fc.constantFrom<DurationCase>(
    { input: '1.5s', ms: 1_500, exact: true },
    { input: '500ms', ms: 500, exact: true },
    { input: 'PT30S', ms: 30_000, exact: true },
    { input: 'PT1.5S', ms: 1_500, exact: true },
    { input: 'PT1,5S', ms: 1_500, exact: true },
    { input: 'P1M', ms: 30 * UNIT_MS.d, exact: true },
    { input: 'P10Y', ms: MAX_DURATION_MS, exact: true },
    { input: '3650d', ms: MAX_DURATION_MS, exact: true },
    { input: MAX_DURATION_MS, ms: MAX_DURATION_MS, exact: true },
  ),
);

/** Zero in every form: valid for `lockAtLeastFor`, not for `lockAtMostFor`. */
const zeroDurations = fc.constantFrom<DurationInput>(0, '0ms', '0s', '0.0m', '000d', 'PT0S', 'P0D', Duration.fromObject({}));

const JOBS = ['j', 'nightly "report"', "it's \\ here", '🦀 job'];
const jobs = fc.constantFrom(...JOBS);

/** Strings outside the grammar: they are neither a short form nor start like an ISO duration. */
const SHORT_FORM = /^\d+(\.\d+)?(ms|s|m|h|d)$/;
const offGrammarStrings = fc
  .oneof(fc.string(), fc.string({ unit: 'binary', maxLength: 12 }), fc.stringMatching(/^[-+ .,\d]{0,4}[a-zA-Z ]{0,8}$/))
  .filter((text) => !SHORT_FORM.test(text) && !text.startsWith('P'));

/** Near misses of valid forms, all invalid by the README. */
const nearMisses = fc.oneof(
  fc.constantFrom(
    '', ' ', 'P', 'PT', 'PT S', 'P1', 'PT1', 'P1H', 'PT1D', 'P1Q', 'P1D1D', 'P1,5D', 'pt5m', 'PT5m', 'P T5M',
    '5 minutes', '5min', '5mins', '5sec', '1w', '1y', '5M', '5S', '5Ms', '5MS', '5H', '5D', '1e3ms', '.5s', '5.s',
    '1,5s', '5m30s', '1h30m', '-5m', '+5m', ' 5m', '5m ', '5 m', 'Infinity', 'NaN', '-1', '1000', '0x10', '1_000ms',
    '1 000ms', 'PT-1S', '-PT1S', 'P-1D', '-P1D', 'PT1S ', ' PT1S', 'PT1S.', 'P1DT1S1S', '5m\n', '5\u00A0m', '５m',
  ),
  fc
    .tuple(shortIntegers(0), fc.constantFrom(' ', '-', '+', 'x', '\n', '.'), fc.boolean())
    .map(([c, extra, before]) => (before ? `${extra}${String(c.input)}` : `${String(c.input)}${extra}`)),
  shortIntegers(0).map((c) => String(c.input).replace(/(ms|s|m|h|d)$/, (u) => ({ ms: 'MS', s: 'sec', m: 'min', h: 'hr', d: 'day' })[u as Unit])),
);

const overMaximum: fc.Arbitrary<DurationInput> = fc.oneof(
  fc.double({ min: MAX_DURATION_MS, minExcluded: true, max: Number.MAX_VALUE, noNaN: true }),
  fc.integer({ min: MAX_DURATION_MS + 1, max: Number.MAX_SAFE_INTEGER }),
  unit.chain((u) =>
    fc.integer({ min: Math.floor(MAX_DURATION_MS / UNIT_MS[u]) + 1, max: Number.MAX_SAFE_INTEGER }).map((n) => `${n}${u}`),
  ),
  fc.integer({ min: 3_651, max: 1_000_000 }).map((days) => `P${days}D`),
  fc.integer({ min: 11, max: 10_000 }).map((years) => `P${years}Y`),
  fc.constantFrom<DurationInput>('P10YT0.001S', `${MAX_DURATION_MS + 1}ms`, Duration.fromObject({ days: 3_651 })),
);

const notADuration: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: offGrammarStrings },
  { weight: 4, arbitrary: nearMisses },
  fc.double({ max: -Number.MIN_VALUE, noNaN: true }),
  fc.integer({ max: -1 }),
  fc.constantFrom<unknown>(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  fc.anything().filter((value) => typeof value !== 'number' && typeof value !== 'string' && value !== undefined),
  fc.constantFrom<unknown>(
    null, true, 5n, Symbol('5m'), [5], ['5m'], { minutes: 5 }, new Number(5), new String('5m'), new Date(5), () => 5,
    Duration.invalid('broken'), Duration.fromObject({ hours: -1 }), Duration.fromObject({ days: 1, hours: -25 }),
  ),
);

function expectDurationError(call: () => unknown, option: string, job: string, value: unknown): void {
  const typeError = expectTypeError(failureOfSync(call), `Expected \`${option}\` of job ${JSON.stringify(job)} to be a duration`);
  expect(typeError.message).toContain(`got ${shown(value)}`);
}

describe('bad input: durations', () => {
  it('resolves numbers of ms, short forms, ISO 8601 and luxon durations to their milliseconds', async () => {
    await withGuard((guard) => {
      fc.assert(
        fc.property(positiveDurations, jobs, ({ input, ms, exact }, name) => {
          const job = guard.resolveJob({ name, lockAtMostFor: input });
          if (exact) expect(job.lockAtMostForMs).toBe(ms);
          else expect(Math.abs(job.lockAtMostForMs - ms)).toBeLessThanOrEqual(ms * 1e-12);
          // lockAtLeastFor takes the same values, up to lockAtMostFor.
          const least = guard.resolveJob({ name, lockAtMostFor: MAX_DURATION_MS, lockAtLeastFor: input });
          expect(least.lockAtLeastForMs).toBe(job.lockAtMostForMs);
        }),
        { numRuns: 400 },
      );
    });
  });

  it('accepts zero for lockAtLeastFor and rejects it for lockAtMostFor', async () => {
    await withGuard((guard) => {
      fc.assert(
        fc.property(zeroDurations, jobs, (input, name) => {
          expect(guard.resolveJob({ name, lockAtMostFor: '1m', lockAtLeastFor: input }).lockAtLeastForMs).toBe(0);
          expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: input }), 'lockAtMostFor', name, input);
        }),
        { numRuns: 30 },
      );
    });
  });

  it('throws a TypeError naming the option, the job and the value for anything else', async () => {
    await withGuard((guard) => {
      fc.assert(
        fc.property(notADuration, jobs, (value, name) => {
          const input = value as DurationInput;
          expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: input }), 'lockAtMostFor', name, value);
          expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: '1m', lockAtLeastFor: input }), 'lockAtLeastFor', name, value);
        }),
        { numRuns: 400 },
      );
    });
  });

  it('rejects durations longer than ten years, and says so', async () => {
    await withGuard((guard) => {
      fc.assert(
        fc.property(overMaximum, jobs, (value, name) => {
          expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: value }), 'lockAtMostFor', name, value);
          const error = failureOfSync(() => guard.resolveJob({ name, lockAtMostFor: value }));
          expect((error as Error).message).toContain('(longer than the maximum, ten years)');
        }),
        { numRuns: 150 },
      );
    });
  });

  it('rejects a bad duration passed to run() without running the job', async () => {
    await withGuard(async (guard) => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(notADuration, overMaximum), async (value) => {
          let ran = false;
          const error = await failureOf(() => guard.run({ name: 'j', lockAtMostFor: value as DurationInput }, () => (ran = true)));
          expectTypeError(error, 'Expected `lockAtMostFor` of job "j" to be a duration');
          expect(ran).toBe(false);
        }),
        { numRuns: 100 },
      );
    });
  });
});

// ---------------------------------------------------------------------------------------------
// 4. Table prefixes (no database: a guard connects at its first statement)
// ---------------------------------------------------------------------------------------------

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
      '', 'x; DROP TABLE y', 'x"; DROP TABLE y; --', "x'", 'a b', 'a-b', 'a.b.c', '.a', 'a.', '..', '"quoted"', '`x`', '[x]',
      'x$', 'cronguard_ ', ' cronguard_', 'é', '1abc', '9', `a${'b'.repeat(MAX_PREFIX_LENGTH)}`, 'cronguard_;', 'cronguard_\0',
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
    { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 0, 42, true, ['cronguard_'], { prefix: 'x' }, new String('cronguard_')) },
  );
}

describe.each(DATABASES)('bad input: table prefixes on $name', (database) => {
  it('accepts identifiers of up to 40 characters', async () => {
    await fc.assert(
      fc.asyncProperty(identifiers, async (tablePrefix) => {
        const error = await failureOf(() => withGuard(() => undefined, { database: database.url, tablePrefix }));
        expect(error).toBeUndefined();
      }),
      { numRuns: 60, examples: [['_'], ['a'.repeat(MAX_PREFIX_LENGTH)], ['cronguard_'], ['Z9']] },
    );
  });

  it.skipIf(!database.supportsSchemas)('accepts schema.prefix', async () => {
    await fc.assert(
      fc.asyncProperty(identifiers, identifiers, async (schema, prefix) => {
        const error = await failureOf(() => withGuard(() => undefined, { database: database.url, tablePrefix: `${schema}.${prefix}` }));
        expect(error).toBeUndefined();
      }),
      { numRuns: 40 },
    );
  });

  it('throws a TypeError for anything else, naming the value', async () => {
    await fc.assert(
      fc.asyncProperty(invalidPrefixes(database.supportsSchemas), async (tablePrefix) => {
        const error = await failureOf(() =>
          withGuard(() => undefined, { database: database.url, tablePrefix: tablePrefix as string }),
        );
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
