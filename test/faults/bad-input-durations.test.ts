// Scenario 6, bad input: durations, property-based (no database). Every valid form resolves to its
// milliseconds; everything else is a TypeError naming the option, the job and the value.
import fc from 'fast-check';
import { Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import type { DurationInput } from '../../src/index.js';
import {
  expectTypeError,
  failureOf,
  failureOfSync,
  MAX_DURATION_MS,
  shown,
  type Unit,
  UNIT_MS,
  UNITS,
  withGuard,
  badInput,
} from './support/bad-input-rules.js';

/** A duration input and the milliseconds it means; `exact` false when decimals round in floating point. */
interface DurationCase {
  readonly input: DurationInput;
  readonly ms: number;
  readonly exact: boolean;
}

const unit = fc.constantFrom(...UNITS);

/** `${n}${unit}` with an integer n, sometimes with leading zeros, from `min` units to the maximum. */
function shortIntegers(min: number): fc.Arbitrary<DurationCase> {
  return fc.tuple(unit, fc.nat({ max: 3 })).chain(([u, zeros]) =>
    fc.integer({ min, max: Math.floor(MAX_DURATION_MS / UNIT_MS[u]) }).map((n) => ({
      input: `${'0'.repeat(zeros)}${n}${u}`,
      ms: n * UNIT_MS[u],
      exact: true,
    })),
  );
}

/** `${n}.${digits}${unit}`, such as '1.5s'. */
const shortDecimals: fc.Arbitrary<DurationCase> = fc.tuple(unit, fc.stringMatching(/^\d{1,4}$/)).chain(([u, digits]) =>
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

/**
 * Durations greater than 0 and at most ten years: valid everywhere, `lockAtMostFor` included (a bare
 * number under 1000 is not: see smallNumbers).
 */
const positiveDurations: fc.Arbitrary<DurationCase> = fc.oneof(
  fc.double({ min: 1_000, max: MAX_DURATION_MS, noNaN: true }).map((n) => ({ input: n, ms: n, exact: true })),
  fc.integer({ min: 1_000, max: MAX_DURATION_MS }).map((n) => ({ input: n, ms: n, exact: true })),
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

/** Bare numbers over 0 and under 1000: milliseconds, but as `lockAtMostFor` almost always meant seconds. */
const smallNumbers = fc.oneof(
  fc.double({ min: Number.MIN_VALUE, max: 1_000, maxExcluded: true, noNaN: true }),
  fc.integer({ min: 1, max: 999 }),
);

/** Whole milliseconds, as every duration resolves: a fraction rounds up (after the float noise of decimals). */
const wholeMs = (ms: number): number => Math.ceil(Math.round(ms * 1_000) / 1_000);

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
    '',
    ' ',
    'P',
    'PT',
    'PT S',
    'P1',
    'PT1',
    'P1H',
    'PT1D',
    'P1Q',
    'P1D1D',
    'P1,5D',
    'pt5m',
    'PT5m',
    'P T5M',
    '5 minutes',
    '5min',
    '5mins',
    '5sec',
    '1w',
    '1y',
    '5M',
    '5S',
    '5Ms',
    '5MS',
    '5H',
    '5D',
    '1e3ms',
    '.5s',
    '5.s',
    '1,5s',
    '5m30s',
    '1h30m',
    '-5m',
    '+5m',
    ' 5m',
    '5m ',
    '5 m',
    'Infinity',
    'NaN',
    '-1',
    '1000',
    '0x10',
    '1_000ms',
    '1 000ms',
    'PT-1S',
    '-PT1S',
    'P-1D',
    '-P1D',
    'PT1S ',
    ' PT1S',
    'PT1S.',
    'P1DT1S1S',
    '5m\n',
    '5\u00A0m',
    '５m',
  ),
  fc
    .tuple(shortIntegers(0), fc.constantFrom(' ', '-', '+', 'x', '\n', '.'), fc.boolean())
    .map(([c, extra, before]) => (before ? `${extra}${String(c.input)}` : `${String(c.input)}${extra}`)),
  shortIntegers(0).map((c) =>
    String(c.input).replace(/(ms|s|m|h|d)$/, (u) => ({ ms: 'MS', s: 'sec', m: 'min', h: 'hr', d: 'day' })[u as Unit]),
  ),
);

const overMaximum: fc.Arbitrary<DurationInput> = fc.oneof(
  fc.double({ min: MAX_DURATION_MS, minExcluded: true, max: Number.MAX_VALUE, noNaN: true }),
  fc.integer({ min: MAX_DURATION_MS + 1, max: Number.MAX_SAFE_INTEGER }),
  unit.chain((u) => fc.integer({ min: Math.floor(MAX_DURATION_MS / UNIT_MS[u]) + 1, max: Number.MAX_SAFE_INTEGER }).map((n) => `${n}${u}`)),
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
    null,
    true,
    5n,
    Symbol('5m'),
    [5],
    ['5m'],
    { minutes: 5 },
    new Number(5),
    new String('5m'),
    new Date(5),
    () => 5,
    Duration.invalid('broken'),
    Duration.fromObject({ hours: -1 }),
    Duration.fromObject({ days: 1, hours: -25 }),
  ),
);

function expectDurationError(call: () => unknown, option: string, job: string, value: unknown): void {
  const typeError = expectTypeError(failureOfSync(call), `Expected \`${option}\` of job ${JSON.stringify(job)} to be a duration`);
  expect(typeError.message).toContain(`got ${shown(value)}`);
}

describe('bad input: durations', () => {
  it('resolves numbers of ms, short forms, ISO 8601 and luxon durations to their milliseconds', async () => {
    await badInput('options', 'resolves numbers of ms, short forms, ISO 8601 and luxon durations to their milliseconds', async (count) => {
      await withGuard((guard) => {
        fc.assert(
          fc.property(positiveDurations, jobs, ({ input, ms, exact }, name) => {
            count();
            const job = guard.resolveJob({ name, lockAtMostFor: input });
            // Whole milliseconds on every dialect: a fraction rounds up.
            expect(Number.isInteger(job.lockAtMostForMs)).toBe(true);
            if (exact) expect(job.lockAtMostForMs).toBe(wholeMs(ms));
            else {
              expect(job.lockAtMostForMs).toBeGreaterThanOrEqual(ms - ms * 1e-12);
              expect(job.lockAtMostForMs).toBeLessThan(ms + 1 + ms * 1e-12);
            }
            // lockAtLeastFor takes the same values, up to lockAtMostFor.
            const least = guard.resolveJob({ name, lockAtMostFor: MAX_DURATION_MS, lockAtLeastFor: input });
            expect(least.lockAtLeastForMs).toBe(job.lockAtMostForMs);
          }),
          { numRuns: 400 },
        );
      });
    });
  });

  it('rejects a bare number under 1000 for lockAtMostFor, suggesting seconds or ms; accepts it elsewhere', async () => {
    await badInput(
      'options',
      'rejects a bare number under 1000 for lockAtMostFor, suggesting seconds or ms; accepts it elsewhere',
      async (count) => {
        await withGuard((guard) => {
          fc.assert(
            fc.property(smallNumbers, jobs, (input, name) => {
              count();
              const error = expectTypeError(
                failureOfSync(() => guard.resolveJob({ name, lockAtMostFor: input })),
                `Expected \`lockAtMostFor\` of job ${JSON.stringify(name)} to be a duration like '5m' or 'PT5M', got ${input}: `,
              );
              expect(error.message).toContain(`write '${input}s' for ${input} seconds, or '${input}ms' if you meant milliseconds`);
              expect(guard.resolveJob({ name, lockAtMostFor: '1m', lockAtLeastFor: input }).lockAtLeastForMs).toBe(wholeMs(input));
            }),
            { numRuns: 100 },
          );
        });
      },
    );
  });

  it('accepts zero for lockAtLeastFor and rejects it for lockAtMostFor', async () => {
    await badInput('options', 'accepts zero for lockAtLeastFor and rejects it for lockAtMostFor', async (count) => {
      await withGuard((guard) => {
        fc.assert(
          fc.property(zeroDurations, jobs, (input, name) => {
            count();
            expect(guard.resolveJob({ name, lockAtMostFor: '1m', lockAtLeastFor: input }).lockAtLeastForMs).toBe(0);
            expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: input }), 'lockAtMostFor', name, input);
          }),
          { numRuns: 30 },
        );
      });
    });
  });

  it('throws a TypeError naming the option, the job and the value for anything else', async () => {
    await badInput('options', 'throws a TypeError naming the option, the job and the value for anything else', async (count) => {
      await withGuard((guard) => {
        fc.assert(
          fc.property(notADuration, jobs, (value, name) => {
            count();
            const input = value as DurationInput;
            expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: input }), 'lockAtMostFor', name, value);
            expectDurationError(
              () => guard.resolveJob({ name, lockAtMostFor: '1m', lockAtLeastFor: input }),
              'lockAtLeastFor',
              name,
              value,
            );
          }),
          { numRuns: 400 },
        );
      });
    });
  });

  it('rejects durations longer than ten years, and says so', async () => {
    await badInput('options', 'rejects durations longer than ten years, and says so', async (count) => {
      await withGuard((guard) => {
        fc.assert(
          fc.property(overMaximum, jobs, (value, name) => {
            count();
            expectDurationError(() => guard.resolveJob({ name, lockAtMostFor: value }), 'lockAtMostFor', name, value);
            const error = failureOfSync(() => guard.resolveJob({ name, lockAtMostFor: value }));
            expect((error as Error).message).toContain('(longer than the maximum, ten years)');
          }),
          { numRuns: 150 },
        );
      });
    });
  });

  it('rejects a bad duration passed to run() without running the job', async () => {
    await badInput('options', 'rejects a bad duration passed to run() without running the job', async (count) => {
      await withGuard(async (guard) => {
        await fc.assert(
          fc.asyncProperty(fc.oneof(notADuration, overMaximum), async (value) => {
            count();
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
});
