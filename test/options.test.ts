// Option validation through the public API (createGuard, guard.run, guard.resolveJob, guard.guarded,
// guarded): what is accepted, in milliseconds, and the exact TypeError for what is not. SQLite only
// (in memory or a temp file); the PostgreSQL and MySQL guards below never connect.
import Database from 'better-sqlite3';
import { Duration } from 'luxon';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGuard,
  guarded,
  GuardError,
  setDefaultGuard,
  type DurationInput,
  type Guard,
  type GuardOptions,
  type JobOptions,
  type Logger,
} from '../src/index.js';

const open: Guard[] = [];
afterEach(async () => {
  setDefaultGuard(undefined);
  await Promise.all(open.splice(0).map((guard) => guard.close()));
});

/** A guard on a fresh in-memory SQLite database, closed after the test. */
function memoryGuard(options: Partial<GuardOptions> = {}): Guard {
  const guard = createGuard({ database: 'sqlite::memory:', ...options });
  open.push(guard);
  return guard;
}

/** What `fn` threw, or undefined when it returned. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** What `promise` rejected with, or undefined when it resolved. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

function expectTypeError(error: unknown, message: string): void {
  expect(error).toBeInstanceOf(TypeError);
  expect((error as Error).message).toBe(message);
}

/** createGuard that must throw; a guard it returns anyway is closed after the test. */
function createGuardError(options: unknown): unknown {
  return thrown(() => open.push(createGuard(options as GuardOptions)));
}

/** A value the types do not allow, as the options of a JavaScript caller may hold. */
const untyped = <T>(value: unknown): T => value as T;

function recordingLogger(): Logger & { warnings: string[]; errors: string[] } {
  const warnings: string[] = [];
  const errors: string[] = [];
  return { warnings, errors, warn: (m) => void warnings.push(m), error: (m) => void errors.push(m) };
}

const DURATION = `a duration like '5m' or 'PT5M'`;

describe('durations accepted', () => {
  const accepted: { label: string; input: DurationInput; ms: number }[] = [
    { label: '1500 (a number of milliseconds)', input: 1500, ms: 1500 },
    { label: "'500ms'", input: '500ms', ms: 500 },
    { label: "'30s'", input: '30s', ms: 30_000 },
    { label: "'5m'", input: '5m', ms: 300_000 },
    { label: "'2h'", input: '2h', ms: 7_200_000 },
    { label: "'1d'", input: '1d', ms: 86_400_000 },
    { label: "'1.5s'", input: '1.5s', ms: 1_500 },
    { label: "'1.1s' (1100.0000000000002 in floating point)", input: '1.1s', ms: 1_100 },
    { label: '1500.25 (a fraction of a ms rounds up)', input: 1500.25, ms: 1_501 },
    { label: "'2.5ms' (a fraction of a ms rounds up)", input: '2.5ms', ms: 3 },
    { label: "'0.0001s' (a fraction of a ms rounds up)", input: '0.0001s', ms: 1 },
    { label: "'PT30S'", input: 'PT30S', ms: 30_000 },
    { label: "'P1DT2H'", input: 'P1DT2H', ms: 93_600_000 },
    { label: 'Duration.fromObject({ minutes: 5 })', input: Duration.fromObject({ minutes: 5 }), ms: 300_000 },
  ];

  it.each(accepted)('lockAtMostFor $label is $ms ms', ({ input, ms }) => {
    expect(memoryGuard().resolveJob({ name: 'nightly', lockAtMostFor: input })).toMatchObject({
      name: 'nightly',
      lockAtMostForMs: ms,
      lockAtLeastForMs: 0,
    });
  });

  it.each(accepted)('lockAtLeastFor $label is $ms ms', ({ input, ms }) => {
    expect(memoryGuard().resolveJob({ name: 'nightly', lockAtMostFor: '2d', lockAtLeastFor: input })).toMatchObject({
      lockAtMostForMs: 2 * 86_400_000,
      lockAtLeastForMs: ms,
    });
  });

  it.each(accepted)('defaults $label is $ms ms, for jobs that set neither', ({ input, ms }) => {
    const guard = memoryGuard({ defaults: { lockAtMostFor: input, lockAtLeastFor: input } });
    expect(guard.resolveJob({ name: 'nightly' })).toMatchObject({ lockAtMostForMs: ms, lockAtLeastForMs: ms });
  });

  it('lockAtLeastFor 0, 0s and PT0S are accepted; unset, it is the default, else 0', () => {
    const guard = memoryGuard();
    for (const zero of [0, '0s', 'PT0S']) {
      expect(guard.resolveJob({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: zero }).lockAtLeastForMs).toBe(0);
    }
    expect(guard.resolveJob({ name: 'nightly', lockAtMostFor: '1m' }).lockAtLeastForMs).toBe(0);
    const withDefault = memoryGuard({ defaults: { lockAtLeastFor: '10s' } });
    expect(withDefault.resolveJob({ name: 'nightly', lockAtMostFor: '1m' }).lockAtLeastForMs).toBe(10_000);
  });

  it("a job's own durations override the defaults", () => {
    const guard = memoryGuard({ defaults: { lockAtMostFor: '10m', lockAtLeastFor: '10s' } });
    expect(guard.resolveJob({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: '1s' })).toMatchObject({
      lockAtMostForMs: 60_000,
      lockAtLeastForMs: 1_000,
    });
  });

  it('lockAtLeastFor equal to lockAtMostFor is accepted', () => {
    expect(memoryGuard().resolveJob({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: '60s' })).toMatchObject({
      lockAtMostForMs: 60_000,
      lockAtLeastForMs: 60_000,
    });
  });

  it("lockAtLeastFor: '300ms' keeps the lock 300 ms after a short job, then frees it", async () => {
    const guard = memoryGuard();
    await guard.migrate();
    const job = { name: 'short', lockAtMostFor: '1m', lockAtLeastFor: '300ms' };
    expect(await guard.run(job, () => 1)).toEqual({ executed: true, value: 1 });
    expect(await guard.run(job, () => 2)).toEqual({ executed: false, reason: 'locked' });
    await sleep(450);
    expect(await guard.run(job, () => 3)).toEqual({ executed: true, value: 3 });
  });

  it("lockAtMostFor: '300ms' is 300 ms: another run takes the lock over once it has passed", async () => {
    const logger = recordingLogger();
    const guard = memoryGuard({ logger });
    await guard.migrate();
    const job = { name: 'slow', lockAtMostFor: '300ms' };
    let release: (() => void) | undefined;
    const holding = guard.run(job, () => new Promise<void>((resolve) => (release = resolve)));
    await expect.poll(() => release).toBeTypeOf('function');
    expect(await guard.run(job, () => 'early')).toEqual({ executed: false, reason: 'locked' });
    await sleep(450);
    expect(await guard.run(job, () => 'late')).toEqual({ executed: true, value: 'late' });
    release?.();
    expect(await holding).toEqual({ executed: true, value: undefined });
    expect(logger.warnings).toEqual([expect.stringContaining('Job "slow" outlived its lock: lockAtMostFor (300 ms) passed')]);
    expect(logger.errors).toEqual([]);
  });
});

describe('durations rejected', () => {
  const rejected: [label: string, value: unknown, shown: string][] = [
    ['-1', -1, '-1'],
    ['NaN', NaN, 'NaN'],
    ['Infinity', Infinity, 'Infinity'],
    ['-Infinity', -Infinity, '-Infinity'],
    ["'5 minutes'", '5 minutes', '"5 minutes"'],
    ["''", '', '""'],
    ["'5M' (units are lower case)", '5M', '"5M"'],
    ["'-500ms'", '-500ms', '"-500ms"'],
    ["'-PT5M' (negative ISO)", '-PT5M', '"-PT5M"'],
    ["'PT-5M' (negative ISO)", 'PT-5M', '"PT-5M"'],
    ["'5m ' (trailing space)", '5m ', '"5m "'],
    ['null', null, 'null'],
    ['true', true, 'true'],
    ['an object', { minutes: 5 }, '{ minutes: 5 }'],
    ["'P' (luxon reads it as zero)", 'P', '"P"'],
    ["'PT' (luxon reads it as zero)", 'PT', '"PT"'],
    ['1e15 (past year 9999)', 1e15, '1000000000000000 (longer than the maximum, ten years)'],
    ['Number.MAX_SAFE_INTEGER', Number.MAX_SAFE_INTEGER, '9007199254740991 (longer than the maximum, ten years)'],
    ["'3651d'", '3651d', '"3651d" (longer than the maximum, ten years)'],
  ];

  it.each(rejected)('lockAtMostFor %s: guard.run rejects with a TypeError, and the job does not run', async (_label, value, shown) => {
    const guard = memoryGuard();
    await guard.migrate();
    let ran = false;
    const error = await rejection(guard.run({ name: 'nightly', lockAtMostFor: untyped(value) }, () => (ran = true)));
    expectTypeError(error, `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got ${shown}`);
    expect(ran).toBe(false);
  });

  it.each(rejected)('lockAtLeastFor %s: guard.run rejects with a TypeError', async (_label, value, shown) => {
    const guard = memoryGuard();
    const error = await rejection(guard.run({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: untyped(value) }, () => 1));
    expectTypeError(error, `Expected \`lockAtLeastFor\` of job "nightly" to be ${DURATION}, got ${shown}`);
  });

  it.each(rejected)('lockAtMostFor %s: guard.guarded throws when called, before it decorates anything', (_label, value, shown) => {
    const error = thrown(() => memoryGuard().guarded({ name: 'nightly', lockAtMostFor: untyped(value) }));
    expectTypeError(error, `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got ${shown}`);
  });

  it.each(rejected)('defaults.lockAtMostFor %s: createGuard throws', (_label, value, shown) => {
    const error = createGuardError({ database: 'sqlite::memory:', defaults: { lockAtMostFor: value } });
    expectTypeError(error, `Expected \`defaults.lockAtMostFor\` to be ${DURATION}, got ${shown}`);
  });

  it.each(rejected)('defaults.lockAtLeastFor %s: createGuard throws', (_label, value, shown) => {
    const error = createGuardError({ database: 'sqlite::memory:', defaults: { lockAtLeastFor: value } });
    expectTypeError(error, `Expected \`defaults.lockAtLeastFor\` to be ${DURATION}, got ${shown}`);
  });

  it.each([
    ['0', 0, '0'],
    ["'0s'", '0s', '"0s"'],
    ["'PT0S'", 'PT0S', '"PT0S"'],
  ] as const)('lockAtMostFor %s is rejected: it must be greater than 0', async (_label, value, shown) => {
    const guard = memoryGuard();
    expectTypeError(
      await rejection(guard.run({ name: 'nightly', lockAtMostFor: value }, () => 1)),
      `Expected \`lockAtMostFor\` of job "nightly" to be a duration greater than 0, got ${shown}`,
    );
    expectTypeError(
      createGuardError({ database: 'sqlite::memory:', defaults: { lockAtMostFor: value } }),
      `Expected \`defaults.lockAtMostFor\` to be a duration greater than 0, got ${shown}`,
    );
  });

  it.each([
    ['30', 30],
    ['999', 999],
    ['0.5', 0.5],
  ])('lockAtMostFor %s (a bare number under 1000) is rejected: it says to write seconds or ms', async (_label, value) => {
    const hint = `a number is milliseconds, so write '${value}s' for ${value} seconds, or '${value}ms' if you meant milliseconds`;
    const guard = memoryGuard();
    expectTypeError(
      await rejection(guard.run({ name: 'nightly', lockAtMostFor: value }, () => 1)),
      `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got ${value}: ${hint}`,
    );
    expectTypeError(
      thrown(() => guarded({ name: 'nightly', lockAtMostFor: value })),
      `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got ${value}: ${hint}`,
    );
    expectTypeError(
      createGuardError({ database: 'sqlite::memory:', defaults: { lockAtMostFor: value } }),
      `Expected \`defaults.lockAtMostFor\` to be ${DURATION}, got ${value}: ${hint}`,
    );
    expectTypeError(
      thrown(() => guard.coordinator({ lockAtMostFor: value })),
      `Expected \`coordinator.lockAtMostFor\` to be ${DURATION}, got ${value}: ${hint}`,
    );
    // 1000 and up stay milliseconds; a string says ms plainly; lockAtLeastFor takes any number.
    expect(guard.resolveJob({ name: 'nightly', lockAtMostFor: 1_000 }).lockAtMostForMs).toBe(1_000);
    expect(guard.resolveJob({ name: 'nightly', lockAtMostFor: `${value}ms` }).lockAtMostForMs).toBe(Math.ceil(value));
    expect(guard.resolveJob({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: value }).lockAtLeastForMs).toBe(Math.ceil(value));
  });

  it('lockAtLeastFor above lockAtMostFor is rejected, in ms', async () => {
    const guard = memoryGuard();
    expectTypeError(
      await rejection(guard.run({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: '2m' }, () => 1)),
      'Expected `lockAtLeastFor` of job "nightly" (120000 ms) to be at most `lockAtMostFor` (60000 ms)',
    );
  });

  it("a job's lockAtLeastFor above the default lockAtMostFor is rejected", () => {
    const guard = memoryGuard({ defaults: { lockAtMostFor: '1m' } });
    expectTypeError(
      thrown(() => guard.resolveJob({ name: 'nightly', lockAtLeastFor: '2m' })),
      'Expected `lockAtLeastFor` of job "nightly" (120000 ms) to be at most `defaults.lockAtMostFor` (60000 ms)',
    );
  });

  it("the default lockAtLeastFor above a job's lockAtMostFor is rejected, naming the job and both values", () => {
    const guard = memoryGuard({ defaults: { lockAtLeastFor: '2m' } });
    expectTypeError(
      thrown(() => guard.resolveJob({ name: 'nightly', lockAtMostFor: '1m' })),
      'Expected `defaults.lockAtLeastFor` of job "nightly" (120000 ms) to be at most `lockAtMostFor` (60000 ms)',
    );
  });

  it('defaults.lockAtLeastFor above defaults.lockAtMostFor: createGuard throws', () => {
    expectTypeError(
      createGuardError({ database: 'sqlite::memory:', defaults: { lockAtMostFor: '1m', lockAtLeastFor: '2m' } }),
      'Expected `defaults.lockAtLeastFor` (120000 ms) to be at most `defaults.lockAtMostFor` (60000 ms)',
    );
  });

  it('no lockAtMostFor on the job and none in defaults: the message says where to set it', async () => {
    const message =
      `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got undefined ` + "(set it on the job or in the guard's `defaults`)";
    const guard = memoryGuard({ defaults: { lockAtLeastFor: '1s' } });
    expectTypeError(await rejection(guard.run({ name: 'nightly' }, () => 1)), message);
    expectTypeError(await rejection(guard.run({ name: 'nightly', lockAtMostFor: undefined }, () => 1)), message);
    expectTypeError(
      thrown(() => guard.resolveJob({ name: 'nightly' })),
      message,
    );
    expectTypeError(
      thrown(() => guard.guarded({ name: 'nightly' })),
      message,
    );
    expect(memoryGuard({ defaults: { lockAtMostFor: '10m' } }).resolveJob({ name: 'nightly' }).lockAtMostForMs).toBe(600_000);
  });
});

describe('job names', () => {
  const NAME = 'Expected `name` to be a string of 1 to 255 characters without NUL, got';

  it.each([
    ['255 ASCII characters', 'a'.repeat(255)],
    ['255 emoji (510 UTF-16 code units)', '😀'.repeat(255)],
    ['spaces, punctuation and non-ASCII', 'nightly report: naïve café 日本'],
  ])('accepts %s, and the lock row is found again by the same name', async (_label, name) => {
    const guard = memoryGuard();
    await guard.migrate();
    expect(guard.resolveJob({ name, lockAtMostFor: '1m' }).name).toBe(name);
    expect(await guard.run({ name, lockAtMostFor: '1m', lockAtLeastFor: '1m' }, (ctx) => ctx.name)).toEqual({
      executed: true,
      value: name,
    });
    expect(await guard.run({ name, lockAtMostFor: '1m' }, () => 'again')).toEqual({
      executed: false,
      reason: 'locked',
    });
  });

  const rejected: [label: string, name: unknown, shown: string][] = [
    ["''", '', '""'],
    ['256 characters', 'a'.repeat(256), JSON.stringify('a'.repeat(256))],
    ['256 emoji', '😀'.repeat(256), JSON.stringify('😀'.repeat(256))],
    ['a NUL character', 'a\0b', '"a\\u0000b"'],
    ["a lone high surrogate '\\uD800'", '\uD800', '"\\ud800"'],
    ['a lone low surrogate', 'a\uDC00b', '"a\\udc00b"'],
    ['a number', 42, '42'],
    ['undefined', undefined, 'undefined'],
    ['null', null, 'null'],
    ['a String object', new String('nightly'), "[String: 'nightly']"],
  ];

  it.each(rejected)('rejects %s: guard.run, resolveJob, guard.guarded and guarded()', async (_label, name, shown) => {
    const guard = memoryGuard();
    await guard.migrate();
    const options: JobOptions = { name: untyped(name), lockAtMostFor: '1m' };
    let ran = false;
    expectTypeError(await rejection(guard.run(options, () => (ran = true))), `${NAME} ${shown}`);
    expect(ran).toBe(false);
    expectTypeError(
      thrown(() => guard.resolveJob(options)),
      `${NAME} ${shown}`,
    );
    expectTypeError(
      thrown(() => guard.guarded(options)),
      `${NAME} ${shown}`,
    );
    expectTypeError(
      thrown(() => guarded(options)),
      `${NAME} ${shown}`,
    );
  });

  it.each([
    ['null', null, 'null'],
    ['a string', 'nightly', '"nightly"'],
    ['undefined', undefined, 'undefined'],
  ])('rejects job options that are %s', async (_label, options, shown) => {
    const message = `Expected job options to be an object with a \`name\`, got ${shown}`;
    const guard = memoryGuard();
    expectTypeError(await rejection(guard.run(untyped(options), () => 1)), message);
    expectTypeError(
      thrown(() => guard.guarded(untyped(options))),
      message,
    );
    expectTypeError(
      thrown(() => guarded(untyped(options))),
      message,
    );
  });
});

describe('tablePrefix', () => {
  const sqliteMessage = (shown: string): string =>
    "Expected `tablePrefix` to be an identifier like 'cronguard_' (schema-qualified prefixes are PostgreSQL only) " +
    `of at most 40 characters, got ${shown}`;

  it.each([
    ["'bad-prefix'", 'bad-prefix', '"bad-prefix"'],
    ["'x; DROP TABLE y'", 'x; DROP TABLE y', '"x; DROP TABLE y"'],
    ["'schema.prefix' (schemas are PostgreSQL only)", 'schema.prefix', '"schema.prefix"'],
    ["''", '', '""'],
    ["'1st_' (starts with a digit)", '1st_', '"1st_"'],
    ["'a\"b'", 'a"b', '"a\\"b"'],
    ['41 characters', 'a'.repeat(41), JSON.stringify('a'.repeat(41))],
    ['a number', 42, '42'],
  ])('rejects %s on SQLite', (_label, prefix, shown) => {
    expectTypeError(createGuardError({ database: 'sqlite::memory:', tablePrefix: prefix }), sqliteMessage(shown));
  });

  it.each(['my_jobs_', 'Jobs1', '_', 'a'.repeat(40)])('accepts %s, and migrate creates <prefix>locks', async (prefix) => {
    const database = new Database(':memory:');
    try {
      const guard = createGuard({ database, tablePrefix: prefix });
      open.push(guard);
      await guard.migrate();
      expect(await guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => 'ran')).toEqual({
        executed: true,
        value: 'ran',
      });
      const tables = database.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
      expect(tables).toContain(`${prefix}locks`);
    } finally {
      await Promise.all(open.splice(0).map((guard) => guard.close()));
      database.close();
    }
  });

  it('accepts schema.prefix on PostgreSQL and rejects it on MySQL (neither connects)', async () => {
    const postgres = createGuard({ database: 'postgres://user:pass@127.0.0.1:9/none', tablePrefix: 'jobs.cg_' });
    open.push(postgres);
    expect(postgres.dialect).toBe('postgres');
    expectTypeError(
      createGuardError({ database: 'postgres://user:pass@127.0.0.1:9/none', tablePrefix: 'a.b.c' }),
      'Expected `tablePrefix` to be an identifier like \'cronguard_\' (or `schema.prefix`) of at most 40 characters, got "a.b.c"',
    );
    expectTypeError(
      createGuardError({ database: 'mysql://user:pass@127.0.0.1:9/none', tablePrefix: 'jobs.cg_' }),
      sqliteMessage('"jobs.cg_"'),
    );
  });
});

describe('database and the other guard options', () => {
  it('rejects history that is not a boolean, and history: false with options that write history', () => {
    const database = 'sqlite::memory:';
    expectTypeError(createGuardError({ database, history: 'no' as unknown as boolean }), 'Expected `history` to be a boolean, got "no"');
    expectTypeError(
      createGuardError({ database, history: false, recordSkips: true }),
      'Expected `recordSkips` to be false when `history` is false, got true',
    );
    expectTypeError(
      createGuardError({ database, history: false, historyRetention: '30d' }),
      'Expected no `historyRetention` when `history` is false, got "30d"',
    );
  });

  it.each([
    ["'foo://x'", 'foo://x', '"foo://x"'],
    ["'sqlite:' (no path)", 'sqlite:', '"sqlite:"'],
    ["'maria://x'", 'maria://x', '"maria://x"'],
  ])('rejects the URL %s', (_label, database, shown) => {
    expectTypeError(
      createGuardError({ database }),
      `Expected \`database\` to be a URL starting with postgres://, postgresql://, mysql://, mariadb:// or sqlite:, got ${shown}`,
    );
  });

  it("rejects database '' and says an environment variable may be empty", () => {
    expectTypeError(
      createGuardError({ database: '' }),
      'Expected `database` to be a URL starting with postgres://, postgresql://, mysql://, mariadb:// or sqlite:, ' +
        'got "" (an environment variable set to an empty string?)',
    );
  });

  it.each([
    ['42', 42, '42'],
    ['an empty object', {}, '{}'],
    ['true', true, 'true'],
    [
      'an instance of a class',
      new (class Knex {
        readonly client = 'pg';
      })(),
      'an instance of Knex',
    ],
  ])('rejects database %s', (_label, database, shown) => {
    expectTypeError(
      createGuardError({ database }),
      'Expected `database` to be a URL (postgres://, mysql://, mariadb://, sqlite:<path>), a Kysely instance, a pg Pool, ' +
        `a mysql2 pool or a better-sqlite3 Database, got ${shown}`,
    );
  });

  it('requires database: missing, undefined (an unset environment variable) or no options at all is a TypeError', () => {
    const message =
      'Expected `database` to be a URL or a database handle, got undefined: it is required ' +
      '(`process.env.DATABASE_URL` is undefined when the variable is not set: is it set?)';
    expectTypeError(createGuardError({}), message);
    expectTypeError(createGuardError({ database: undefined }), message);
    expectTypeError(createGuardError({ database: process.env.CRONGUARD_TEST_SURELY_UNSET, defaults: { lockAtMostFor: '1m' } }), message);
    expectTypeError(
      thrown(() => open.push(untyped<() => Guard>(createGuard)())),
      message,
    );
    expect(open).toEqual([]);
  });

  it.each([
    // `#` starts a fragment: parsed as host "ss", the rest dropped.
    ["an unescaped '#' (and '@')", 'postgres://app:p@ss#x@db.internal/jobs', 'postgres://app:***@db.internal/jobs'],
    ["an unescaped '#'", 'mysql://app:pa#ss@db.internal/jobs', 'mysql://app:***@db.internal/jobs'],
    ["an unescaped '/'", 'postgresql://app:pa/ss@db.internal/jobs', 'postgresql://app:***@db.internal/jobs'],
    ["an unescaped '?'", 'mariadb://app:pa?ss@db.internal/jobs', 'mariadb://app:***@db.internal/jobs'],
    ["a bad '%' escape", 'mysql://app:100%off@db.internal/jobs', 'mysql://app:***@db.internal/jobs'],
  ])('rejects a URL with %s in its user info, says to percent-encode, and never shows the password', (_label, database, shown) => {
    const error = createGuardError({ database });
    expectTypeError(
      error,
      `Expected \`database\` to be a URL that can be parsed, got ${JSON.stringify(shown)}: percent-encode the user name and ` +
        'password (encodeURIComponent; @ is %40, # is %23, / is %2F, ? is %3F, % is %25)',
    );
    expect((error as Error).message).not.toMatch(/ss@|off@/);
  });

  it.each([
    ['postgres://h1,h2/jobs?target_session_attrs=read-write', 'postgres://h1,h2/jobs?target_session_attrs=read-write', 'pg'],
    ['postgresql://app:s3cret@db1:5432,db2:5432/jobs', 'postgresql://app:***@db1:5432,db2:5432/jobs', 'pg'],
    ['mysql://app@db1,db2/jobs', 'mysql://app@db1,db2/jobs', 'mysql2'],
  ])('rejects the multi-host URL %s: the driver has none, and says what to use instead', (database, shown, driver) => {
    const error = createGuardError({ database });
    expect(error).toBeInstanceOf(TypeError);
    const { message } = error as TypeError;
    expect(message).toMatch(
      new RegExp(
        `^Expected \`database\` to be a URL with one host, got ${JSON.stringify(shown).replace(/[?*]/g, '\\$&')}: the \`${driver}\` driver`,
      ),
    );
    expect(message).toMatch(/has no multi-host URL/);
    expect(message).toMatch(/DNS name or virtual IP.*proxy.*load balancer that health-checks for the primary/);
    expect(message).not.toMatch(/percent-encode|s3cret/);
  });

  it('accepts a password holding a comma (one host)', () => {
    expect(createGuardError({ database: 'postgres://app:a,b@127.0.0.1:9/x' })).toBeUndefined();
  });

  it("masks the whole user info of a mistyped URL whose user name holds '@'", () => {
    expectTypeError(
      createGuardError({ database: 'postgress://app@corp:secret@db.internal/jobs' }),
      'Expected `database` to be a URL starting with postgres://, postgresql://, mysql://, mariadb:// or sqlite:, ' +
        'got "postgress://***@db.internal/jobs"',
    );
  });

  it('accepts each URL scheme, case-insensitively, and percent-encoded passwords, without connecting', () => {
    const urls = [
      'sqlite::memory:',
      'SQLITE::memory:',
      'postgres://u@127.0.0.1:9/x',
      'postgresql://u@127.0.0.1:9/x',
      'mysql://u@127.0.0.1:9/x',
      'mariadb://u@127.0.0.1:9/x',
      'MariaDB://u@127.0.0.1:9/x',
      `postgres://u:${encodeURIComponent('p@ss#x/y?z%')}@127.0.0.1:9/x`,
      // An unescaped '@' alone parses as meant: the user info ends at the last '@'.
      'mysql://u:p@ss@127.0.0.1:9/x',
    ];
    const dialects = urls.map((database) => {
      const guard = createGuard({ database });
      open.push(guard);
      return guard.dialect;
    });
    expect(dialects).toEqual(['sqlite', 'sqlite', 'postgres', 'postgres', 'mysql', 'mysql', 'mysql', 'postgres', 'mysql']);
  });

  it('rejects an acquireTimeout of 0: every run would be skipped', () => {
    for (const acquireTimeout of [0, '0s', 'PT0S']) {
      expectTypeError(
        createGuardError({ database: 'sqlite::memory:', acquireTimeout }),
        `Expected \`acquireTimeout\` to be a duration of at least 1 ms, got ${JSON.stringify(acquireTimeout)}`,
      );
    }
    const guard = createGuard({ database: 'sqlite::memory:', acquireTimeout: 1 });
    open.push(guard);
  });

  it('rejects guard options that are not an object', () => {
    expectTypeError(createGuardError(null), 'Expected guard options to be an object, got null');
    expectTypeError(createGuardError('sqlite::memory:'), 'Expected guard options to be an object, got "sqlite::memory:"');
  });

  it.each([
    ["''", '', '""'],
    ['256 characters', 'h'.repeat(256), JSON.stringify('h'.repeat(256))],
    ['a number', 7, '7'],
  ])('rejects lockedBy %s', (_label, lockedBy, shown) => {
    expectTypeError(
      createGuardError({ database: 'sqlite::memory:', lockedBy }),
      `Expected \`lockedBy\` to be a string of 1 to 255 characters, got ${shown}`,
    );
  });

  it.each(['database', 'tablePrefix', 'lockedBy', 'logger'])('rejects %s: null instead of falling back to the default', (option) => {
    const error = createGuardError({ database: 'sqlite::memory:', [option]: null });
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(new RegExp(`^Expected \\\`${option}\\\` .*got null`));
  });

  it('opens no SQLite file for a guard whose options fail, or that is never used', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cronguard-lazy-'));
    createGuardError({ database: `sqlite:${join(dir, 'bad.sqlite')}`, tablePrefix: 'bad-prefix' });
    await createGuard({ database: `sqlite:${join(dir, 'unused.sqlite')}` }).close();
    expect(readdirSync(dir)).toEqual([]);
    const used = createGuard({ database: `sqlite:${join(dir, 'used.sqlite')}` });
    await used.migrate();
    await used.close();
    expect(readdirSync(dir)).toContain('used.sqlite');
  });

  it('validates keepAlive and stopMargin against lockAtMostFor', () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    open.push(guard);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '3m', keepAlive: true }).keepAliveIntervalMs).toBe(60_000);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '3m', keepAlive: '20s' }).keepAliveIntervalMs).toBe(20_000);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '3m' }).keepAliveIntervalMs).toBeUndefined();
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '10m' }).stopMarginMs).toBe(30_000);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '10s' }).stopMarginMs).toBe(1_000);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '1s' }).stopMarginMs).toBe(500);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '1m', stopMargin: '10s' }).stopMarginMs).toBe(10_000);
    expectTypeError(
      thrown(() => guard.resolveJob({ name: 'j', lockAtMostFor: '1m', keepAlive: '2m' })),
      'Expected `keepAlive` of job "j" to be true or an interval shorter than `lockAtMostFor` less `stopMargin` (57000 ms), got "2m"',
    );
    expectTypeError(
      thrown(() => guard.resolveJob({ name: 'j', lockAtMostFor: '1m', stopMargin: '1m' })),
      'Expected `stopMargin` of job "j" (60000 ms) to be less than `lockAtMostFor` (60000 ms)',
    );
  });

  it('rejects keepAlive: true with a stopMargin that fires before the first extend, saying which to change', () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    open.push(guard);
    // keepAlive: true extends every lockAtMostFor / 3 (20 s of 1 m); the signal fires stopMargin before expiry.
    const message =
      'Expected `stopMargin` of job "j" (40000 ms) to be less than two thirds of `lockAtMostFor` with `keepAlive: true`, ' +
      'which extends every 20000 ms: the deadline would fire before the first extend. Lower `stopMargin` below 40000 ms, ' +
      'or give `keepAlive` an interval shorter than 20000 ms';
    expectTypeError(
      thrown(() => guard.resolveJob({ name: 'j', lockAtMostFor: '1m', keepAlive: true, stopMargin: '40s' })),
      message,
    );
    expectTypeError(
      thrown(() => guarded({ name: 'j', lockAtMostFor: '1m', keepAlive: true, stopMargin: '40s' })),
      message,
    );
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '1m', keepAlive: true, stopMargin: '39s' }).keepAliveIntervalMs).toBe(20_000);
    expect(guard.resolveJob({ name: 'j', lockAtMostFor: '1m', keepAlive: '19s', stopMargin: '40s' }).keepAliveIntervalMs).toBe(19_000);
  });

  it('rejects a logger without warn() and error()', () => {
    expectTypeError(
      createGuardError({ database: 'sqlite::memory:', logger: { warn: () => undefined } }),
      'Expected `logger` to have warn() and error() methods, got { warn: [Function: warn] }',
    );
  });

  it('rejects defaults that are not an object', () => {
    expectTypeError(createGuardError({ database: 'sqlite::memory:', defaults: '5m' }), 'Expected `defaults` to be an object, got "5m"');
  });
});

describe('decorators validate their options when applied', () => {
  it('guard.guarded() throws at decoration time, so neither form of the decorator is ever returned', () => {
    const guard = memoryGuard();
    const message = `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got "5 minutes"`;
    let decorator: unknown;
    expectTypeError(
      thrown(() => (decorator = guard.guarded({ name: 'nightly', lockAtMostFor: '5 minutes' }))),
      message,
    );
    expect(decorator).toBeUndefined();
    expectTypeError(
      thrown(() => guard.guarded({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: '2m' })),
      'Expected `lockAtLeastFor` of job "nightly" (120000 ms) to be at most `lockAtMostFor` (60000 ms)',
    );
  });

  it('guard.guarded() with valid options wraps a method in either form; `this` and the arguments pass through', async () => {
    const guard = memoryGuard();
    await guard.migrate();
    async function add(this: { base: number }, a: number, b: number): Promise<number | undefined> {
      return this.base + a + b;
    }
    const decorator = guard.guarded({ name: 'add', lockAtMostFor: '1m' });
    const standard = decorator(add, untyped({ kind: 'method', name: 'add' }));
    expect(standard.name).toBe('add');
    expect(await standard.call({ base: 100 }, 20, 3)).toBe(123);

    const descriptor: PropertyDescriptor = { value: add, writable: true, configurable: true };
    expect(decorator({}, 'add', descriptor)).toBe(descriptor);
    expect(descriptor.value).not.toBe(add);
    expect(await (descriptor.value as typeof add).call({ base: 1 }, 2, 3)).toBe(6);
  });

  it('refuses to decorate anything but a method', () => {
    const decorator = memoryGuard().guarded({ name: 'nightly', lockAtMostFor: '1m' });
    expectTypeError(
      thrown(() =>
        decorator(async () => 1, untyped<ClassMethodDecoratorContext<unknown, () => Promise<number>>>({ kind: 'getter', name: 'x' })),
      ),
      'Expected @guarded to decorate a method, got a getter',
    );
    expectTypeError(
      thrown(() => decorator({}, 'count', untyped<PropertyDescriptor>({ value: 1, writable: true }))),
      'Expected @guarded to decorate a method, got a property holding 1 (count)',
    );
  });

  it('guarded() throws at decoration time for what it can check without a guard', () => {
    expectTypeError(
      thrown(() => guarded({ name: 'nightly', lockAtMostFor: '5 minutes' })),
      `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got "5 minutes"`,
    );
    expectTypeError(
      thrown(() => guarded({ name: 'nightly', lockAtMostFor: '1m', lockAtLeastFor: '2m' })),
      'Expected `lockAtLeastFor` of job "nightly" (120000 ms) to be at most `lockAtMostFor` (60000 ms)',
    );
  });

  it("guarded() without lockAtMostFor is checked against the default guard's defaults at the call", async () => {
    async function job(): Promise<string | undefined> {
      return 'ran';
    }
    const method = guarded({ name: 'nightly' })(
      job,
      untyped<ClassMethodDecoratorContext<unknown, typeof job>>({ kind: 'method', name: 'job' }),
    );

    const noGuard = await rejection(method.call(undefined));
    expect(noGuard).toBeInstanceOf(GuardError);
    expect(noGuard).toMatchObject({ code: 'NO_DEFAULT_GUARD', job: 'nightly' });

    const withoutDefaults = memoryGuard();
    await withoutDefaults.migrate();
    setDefaultGuard(withoutDefaults);
    expectTypeError(
      await rejection(method.call(undefined)),
      `Expected \`lockAtMostFor\` of job "nightly" to be ${DURATION}, got undefined (set it on the job or in the guard's \`defaults\`)`,
    );

    const withDefaults = memoryGuard({ defaults: { lockAtMostFor: '1m' } });
    await withDefaults.migrate();
    setDefaultGuard(withDefaults);
    expect(await method.call(undefined)).toBe('ran');
  });
});
