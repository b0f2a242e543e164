// MySQL/MariaDB server settings the guard must not depend on, on a MariaDB this file starts (they
// are server-wide, so never on the shared test server): NO_BACKSLASH_ESCAPES and ANSI_QUOTES in
// sql_mode (a job name must stay a value), and any isolation level (SERIALIZABLE, REPEATABLE READ).
import { Kysely, MysqlDialect } from 'kysely';
import mysql from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuard, type GuardOptions } from '../src/index.js';
import { findMariadbd, startMariadb, type RunningDatabase } from './setup/databases.js';
import { uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';
import { HOSTILE_NAMES, slotRace } from './support/slot-race.js';
import { cronguard } from './support/cronguard-cli.js';

const HOSTILE_SQL_MODE = 'NO_BACKSLASH_ESCAPES,ANSI_QUOTES,STRICT_TRANS_TABLES';

let server: RunningDatabase | undefined;
let raw: RawDatabase;

beforeAll(async () => {
  server = await startMariadb({ serverFlags: [`--sql-mode=${HOSTILE_SQL_MODE}`] });
  raw = await openRaw('mysql', server.url);
}, 120_000);

afterAll(async () => {
  await raw?.close();
  await server?.stop();
});

function url(): string {
  if (server === undefined) throw new Error('no server');
  return server.url;
}

/** Every column of every lock row but the ones of `except`, as the server has them. */
async function lockRows(prefix: string, except: readonly string[] = []): Promise<Record<string, unknown>[]> {
  const rows = await raw.query<Record<string, unknown> & { n: string }>(
    `SELECT HEX(name) AS n, lock_until, locked_at, locked_by, token, previous_token, last_slot FROM \`${prefix}locks\` ORDER BY name`,
  );
  const skip = new Set(except.map((name) => Buffer.from(name, 'utf8').toString('hex').toUpperCase()));
  return rows.filter((row) => !skip.has(row.n));
}

/** Runs that hold their lock until `release()`. */
function holdLocks(run: (name: string, job: () => Promise<void>) => Promise<unknown>, names: readonly string[]) {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const started = names.map(
    (name) =>
      new Promise<void>(
        (resolve) =>
          void run(name, async () => {
            resolve();
            await gate;
          }),
      ),
  );
  return { started: Promise.all(started), release };
}

const VICTIMS = ['victim', 'x', 'victim-2'];

/** Guards on the hostile server: from a URL, from a mysql2 pool passed in, from a Kysely instance passed in. */
const inputs: { kind: string; options: () => Pick<GuardOptions, 'database'> & { end?: () => Promise<void> } }[] = [
  { kind: 'a URL', options: () => ({ database: url() }) },
  {
    kind: 'a mysql2 pool passed in',
    options: () => {
      const pool = mysql.createPool({ uri: url(), connectionLimit: 4 });
      return { database: pool, end: () => new Promise<void>((resolve) => pool.end(() => resolve())) };
    },
  },
  {
    kind: 'a Kysely instance passed in',
    options: () => {
      const db = new Kysely<unknown>({
        dialect: new MysqlDialect({ pool: mysql.createPool({ uri: url(), connectionLimit: 4 }) }),
      });
      return { database: db, end: () => db.destroy() };
    },
  },
];

describe.skipIf(findMariadbd() === undefined && process.env['CI'] === undefined)(`MySQL with sql_mode ${HOSTILE_SQL_MODE}`, () => {
  describe.each(inputs)('on $kind', ({ options }) => {
    it('keeps every job name a value: run and unlock touch only their own rows, history filters exactly', async () => {
      const prefix = uniquePrefix();
      const { end, ...database } = options();
      try {
        const guard = createGuard({
          ...database,
          tablePrefix: prefix,
          logger: { warn: () => undefined, error: () => undefined },
        });
        try {
          await guard.migrate();
          const held = holdLocks((name, job) => guard.run({ name, lockAtMostFor: '5m' }, job), VICTIMS);
          await held.started;
          const victimsBefore = await lockRows(prefix);
          expect(victimsBefore).toHaveLength(VICTIMS.length);

          for (const name of HOSTILE_NAMES) {
            // Not locked: nothing to free, and no other job's lock freed either.
            expect(await guard.unlock(name), JSON.stringify(name)).toBe(false);
            expect(await guard.run({ name, lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => name)).toEqual({
              executed: true,
              value: name,
            });
          }
          // Their own rows, byte-exact; the victims' rows untouched.
          expect(await lockRows(prefix, HOSTILE_NAMES)).toEqual(victimsBefore);
          const names = (await guard.locks()).map((lock) => lock.name).sort();
          expect(names).toEqual([...VICTIMS, ...HOSTILE_NAMES].sort());

          for (const name of HOSTILE_NAMES) {
            // Held by lockAtLeastFor: unlock frees exactly that one.
            expect(await guard.unlock(name), JSON.stringify(name)).toBe(true);
            const lock = (await guard.locks()).find((candidate) => candidate.name === name);
            expect(lock?.state).toBe('free');
            const { runs } = await guard.history({ job: name });
            expect(runs.map((run) => [run.job, run.status])).toEqual([[name, 'succeeded']]);
          }
          expect(await lockRows(prefix, HOSTILE_NAMES)).toEqual(victimsBefore);
          expect(
            (await guard.locks())
              .filter((lock) => lock.state === 'held')
              .map((lock) => lock.name)
              .sort(),
          ).toEqual([...VICTIMS].sort());
          // Prune and doctor work on these tables (their values are bound too).
          expect(await guard.prune('1d')).toBe(0);
          expect((await guard.doctor()).map((job) => job.job).sort()).toEqual([...VICTIMS, ...HOSTILE_NAMES].sort());
          held.release();
        } finally {
          await guard.close();
        }
      } finally {
        await end?.();
      }
    });
  });

  it('cronguard unlock and history --job take a hostile name as a value', async () => {
    const prefix = uniquePrefix();
    const { guard } = guardOn(url(), prefix);
    await guard.migrate();
    const held = holdLocks((name, job) => guard.run({ name, lockAtMostFor: '5m' }, job), VICTIMS);
    await held.started;
    const before = await lockRows(prefix);
    const hostile = "x' OR 1=1 -- ";
    const cli = async (args: string[]): Promise<string> => {
      const { stdout, stderr } = await cronguard([...args, '--database', url(), '--table-prefix', prefix]);
      return `${stdout}${stderr}`;
    };
    await cli(['unlock', hostile, '--force']);
    expect(await lockRows(prefix)).toEqual(before);
    expect(await guard.run({ name: hostile, lockAtMostFor: '1m' }, () => 1)).toEqual({ executed: true, value: 1 });
    const history = JSON.parse(await cli(['history', '--job', hostile, '--json'])) as { runs: { job: string }[] };
    expect(history.runs.map((run) => run.job)).toEqual([hostile]);
    held.release();
  });

  describe.each(['SERIALIZABLE', 'REPEATABLE READ'])('and transaction isolation %s set globally', (isolation) => {
    it('gives each job one run per slot to 4 racing processes, with no error skip and nothing logged', async () => {
      await raw.exec(`SET GLOBAL TRANSACTION ISOLATION LEVEL ${isolation}`);
      try {
        const prefix = uniquePrefix();
        await guardOn(url(), prefix).guard.migrate();
        const outcome = await slotRace(url(), prefix, [...HOSTILE_NAMES, ...Array.from({ length: 8 }, (_, index) => `job-${index}`)], {
          rounds: 6,
        });
        expect(outcome.firstErrors).toEqual([]);
        expect(outcome.logged).toEqual([]);
        expect({ duplicates: outcome.duplicates, unrun: outcome.unrun, errorSkips: outcome.errorSkips }).toEqual({
          duplicates: 0,
          unrun: 0,
          errorSkips: 0,
        });
      } finally {
        await raw.exec('SET GLOBAL TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      }
    }, 120_000);
  });
});
