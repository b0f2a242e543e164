// The `database` option: every accepted form works, and what the user passed in stays open.
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import { createConnection as createMysqlConnection, createPool as createMysqlCallbackPool } from 'mysql2';
import { createPool as createMysqlPromisePool } from 'mysql2/promise';
import { readdirSync, readlinkSync } from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard, type DatabaseInput } from '../src/index.js';
import { sqlitePath } from '../src/dialects/sqlite/connection.js';
import { databaseUrl, dialectTargets, uniquePrefix, type DialectTarget } from './support/dialects.js';
import { recordingLogger } from './support/guards.js';

interface UserHandle {
  readonly label: string;
  readonly input: DatabaseInput;
  /** The same database by URL, for a second guard, as another replica would connect. */
  readonly url: string;
  /** Proves the handle still works after the guard closed. */
  stillWorks(): Promise<unknown>;
  end(): Promise<void>;
}

function userHandles(target: DialectTarget): UserHandle[] {
  const url = databaseUrl(target);
  if (target.name === 'postgres') {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const kyselyPool = new pg.Pool({ connectionString: url, max: 2 });
    const kysely = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: kyselyPool }) });
    return [
      { label: 'pg.Pool', input: pool, url, stillWorks: () => pool.query('SELECT 1'), end: () => pool.end() },
      {
        label: 'Kysely',
        input: kysely,
        url,
        stillWorks: () => kyselyPool.query('SELECT 1'),
        end: () => kysely.destroy(),
      },
    ];
  }
  if (target.name === 'mysql') {
    const callbackPool = createMysqlCallbackPool({ uri: url, connectionLimit: 2 });
    const promisePool = createMysqlPromisePool({ uri: url, connectionLimit: 2 });
    // Without CLIENT_FOUND_ROWS, MySQL reports changed rows instead of matched rows: the acquire
    // must decide the same either way.
    const noFoundRows = createMysqlPromisePool({ uri: url, connectionLimit: 2, flags: ['-FOUND_ROWS'] });
    const kyselyPool = createMysqlCallbackPool({ uri: url, connectionLimit: 2 });
    const kysely = new Kysely<unknown>({ dialect: new MysqlDialect({ pool: kyselyPool }) });
    return [
      {
        label: 'mysql2 callback pool',
        input: callbackPool,
        url,
        stillWorks: () => callbackPool.promise().query('SELECT 1'),
        end: () => callbackPool.promise().end(),
      },
      {
        label: 'mysql2 promise pool',
        input: promisePool,
        url,
        stillWorks: () => promisePool.query('SELECT 1'),
        end: () => promisePool.end(),
      },
      {
        label: 'mysql2 pool without CLIENT_FOUND_ROWS',
        input: noFoundRows,
        url,
        stillWorks: () => noFoundRows.query('SELECT 1'),
        end: () => noFoundRows.end(),
      },
      {
        label: 'Kysely',
        input: kysely,
        url,
        stillWorks: () => kyselyPool.promise().query('SELECT 1'),
        end: () => kysely.destroy(),
      },
    ];
  }
  const database = new Database(sqlitePath(url));
  const kyselyUrl = databaseUrl(target);
  const kyselyDatabase = new Database(sqlitePath(kyselyUrl));
  const kysely = new Kysely<unknown>({ dialect: new SqliteDialect({ database: kyselyDatabase }) });
  return [
    {
      label: 'better-sqlite3 Database',
      input: database,
      url,
      stillWorks: () => Promise.resolve(database.prepare('SELECT 1').get()),
      end: () => Promise.resolve(void database.close()),
    },
    {
      label: 'Kysely',
      input: kysely,
      url: kyselyUrl,
      stillWorks: () => Promise.resolve(kyselyDatabase.prepare('SELECT 1').get()),
      end: () => kysely.destroy(),
    },
  ];
}

describe.each(dialectTargets())('database input on $name', (target) => {
  it.skipIf(target.serverUrl === null)('guards through each handle the user owns and leaves it open on close()', async () => {
    for (const handle of userHandles(target)) {
      const prefix = uniquePrefix();
      const logger = recordingLogger();
      const guard = createGuard({ database: handle.input, tablePrefix: prefix, logger });
      const other = createGuard({ database: handle.url, tablePrefix: prefix, logger: recordingLogger() });
      try {
        expect(guard.dialect, handle.label).toBe(target.name);
        await guard.migrate();
        const job = { name: 'own-pool', lockAtMostFor: '1m', lockAtLeastFor: '1m' };
        expect(await guard.run(job, () => handle.label), handle.label).toEqual({
          executed: true,
          value: handle.label,
        });
        expect(await guard.run(job, () => 'again'), handle.label).toEqual({ executed: false, reason: 'locked' });
        expect(await other.run(job, () => 'other'), handle.label).toEqual({ executed: false, reason: 'locked' });
        // An extend that moves nothing (the lock already lasts longer) is still an extend, even
        // where the driver counts changed rows rather than matched ones.
        const short = await guard.run({ name: 'own-pool-extend', lockAtMostFor: '1m' }, (ctx) => ctx.extend('1s'));
        expect(short, handle.label).toEqual({ executed: true, value: true });
        const free = { name: 'own-pool-free', lockAtMostFor: '1m' };
        expect((await guard.run(free, () => 1)).executed, handle.label).toBe(true);
        expect((await guard.run(free, () => 2)).executed, handle.label).toBe(true);
        // Every release matched its own row: nothing was reported lost.
        expect(logger.warnings, handle.label).toEqual([]);
        expect(logger.errors, handle.label).toEqual([]);
      } finally {
        await guard.close();
        await other.close();
      }
      await expect(handle.stillWorks(), handle.label).resolves.toBeDefined();
      await handle.end();
    }
  });
});

describe.each(dialectTargets().filter((target) => target.name === 'mysql'))('a mariadb:// URL on $name', (target) => {
  it.skipIf(target.serverUrl === null)('is MySQL: the guard connects with it and takes locks', async () => {
    const url = databaseUrl(target).replace(/^mysql:/, 'mariadb:');
    const guard = createGuard({ database: url, tablePrefix: uniquePrefix(), logger: recordingLogger() });
    try {
      expect(guard.dialect).toBe('mysql');
      await guard.migrate();
      expect(await guard.run({ name: 'maria', lockAtMostFor: '1m' }, () => 'ran')).toEqual({
        executed: true,
        value: 'ran',
      });
    } finally {
      await guard.close();
    }
  });
});

const WRONG_KIND =
  'Expected `database` to be a URL (postgres://, mysql://, mariadb://, sqlite:<path>), a Kysely instance, a pg Pool, ' +
  'a mysql2 pool or a better-sqlite3 Database, got';

describe('a handle of the wrong kind', () => {
  it('is refused in one line that names what it got and what to pass, with the real driver objects', async () => {
    // pg connects only on connect(); mysql2 at once, to a closed port here. The password never shows.
    const pgClient = new pg.Client({ connectionString: 'postgres://app:hunter2@127.0.0.1:9/none' });
    const mysqlConnection = createMysqlConnection({ uri: 'mysql://app:hunter2@127.0.0.1:9/none' });
    mysqlConnection.on('error', () => undefined);
    const database = new Database(':memory:');
    const cases: [label: string, input: unknown, got: string][] = [
      ['pg.Client', pgClient, 'a pg Client; pass a pg Pool'],
      ['mysql2 Connection', mysqlConnection, 'a mysql2 Connection; pass a mysql2 pool (createPool)'],
      ['mysql2 promise Connection', mysqlConnection.promise(), 'a mysql2 promise Connection; pass a mysql2 pool (createPool)'],
      ['better-sqlite3 Statement', database.prepare('SELECT 1'), 'a better-sqlite3 Statement; pass its Database'],
    ];
    try {
      for (const [label, input, got] of cases) {
        let error: unknown;
        try {
          createGuard({ database: input as DatabaseInput });
        } catch (thrown) {
          error = thrown;
        }
        expect(error, label).toBeInstanceOf(TypeError);
        expect((error as Error).message, label).toBe(`${WRONG_KIND} ${got}`);
        expect((error as Error).message, label).not.toContain('hunter2');
      }
    } finally {
      mysqlConnection.destroy();
      database.close();
    }
  });
});

describe.each(dialectTargets().filter((target) => target.name === 'postgres'))('a client checked out of a pg pool on $name', (target) => {
  it.skipIf(target.serverUrl === null)('is refused, naming it and the pool to pass instead', async () => {
    const pool = new pg.Pool({ connectionString: databaseUrl(target), max: 1 });
    const client = await pool.connect();
    try {
      expect(() => createGuard({ database: client as unknown as DatabaseInput })).toThrow(
        new TypeError(`${WRONG_KIND} a pg client checked out of a pool; pass the pg Pool itself`),
      );
    } finally {
      client.release();
      await pool.end();
    }
  });
});

describe('database input', () => {
  it('closes the SQLite file it opened from a URL, also when only lock statements used it', async () => {
    const url = databaseUrl({ name: 'sqlite', serverUrl: 'sqlite:' });
    const path = sqlitePath(url);
    const migrating = createGuard({ database: url });
    await migrating.migrate();
    await migrating.shutdown();
    const openFiles = (): string[] =>
      readdirSync('/proc/self/fd').flatMap((fd) => {
        try {
          return [readlinkSync(`/proc/self/fd/${fd}`)];
        } catch {
          return [];
        }
      });
    expect(openFiles()).not.toContain(path);
    // This guard never sends a query through Kysely: the lock statements open the file themselves.
    const guard = createGuard({ database: url });
    expect(await guard.run({ name: 'lock-only', lockAtMostFor: '1m' }, () => 'ran')).toEqual({
      executed: true,
      value: 'ran',
    });
    expect(openFiles()).toContain(path);
    await guard.shutdown();
    expect(openFiles()).not.toContain(path);
  });

  it.each([{ history: true }, { history: false }])(
    'refuses to take a lock inside a transaction the app opened on its SQLite Database, history: $history',
    async ({ history }) => {
      const database = new Database(':memory:');
      const guard = createGuard({ database, history, telemetry: false, logger: recordingLogger() });
      await guard.migrate();
      database.exec('BEGIN');
      // The take would commit or roll back with the app's transaction: refused (an error skip, the
      // job not run), and nothing written.
      const refused = await guard.run({ name: 'inside', lockAtMostFor: '1m' }, () => 'ran');
      expect(refused).toMatchObject({ executed: false, reason: 'error' });
      const cause = !refused.executed && refused.reason === 'error' ? refused.error.cause : undefined;
      expect(String(cause)).toMatch(/inside a transaction someone else opened/);
      database.exec('ROLLBACK');
      expect(database.prepare(`SELECT count(*) AS n FROM cronguard_locks`).get()).toEqual({ n: 0 });
      expect(await guard.run({ name: 'inside', lockAtMostFor: '1m' }, () => 'ran')).toEqual({ executed: true, value: 'ran' });
      await guard.shutdown();
      database.close();
    },
  );

  it('rejects a Kysely transaction: lock statements must commit on their own', async () => {
    const database = new Database(':memory:');
    const kysely = new Kysely<unknown>({ dialect: new SqliteDialect({ database }) });
    await kysely.transaction().execute(async (trx) => {
      expect(() => createGuard({ database: trx })).toThrow(
        new TypeError('Expected `database` to be a Kysely instance, got a Kysely transaction'),
      );
    });
    await kysely.destroy();
  });
});
