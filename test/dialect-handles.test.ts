// The dialect contract's plumbing, without a database: named SQL parameters translated once into
// each driver's marks, each dialect folder recognising its own handles, and no Kysely internals.
// The statements themselves are proven on real databases by the guard's other tests.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { namedStatement } from '../src/dialects/common/named-parameters.js';
import { dialectOf } from '../src/dialects/connect.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import { sqliteDialect } from '../src/dialects/sqlite/dialect.js';
import type { DatabaseInput } from '../src/index.js';
import { repoRoot } from './support/run-process.js';

describe('namedStatement', () => {
  const text = `SELECT :name, :slot::timestamptz, ':not' || "a:b" || \`c:d\`, '%H:%M', :name, :lockedBy`;

  it('numbers each name once for PostgreSQL, in order of first use, leaving literals and casts alone', () => {
    const statement = namedStatement<{ name: string; slot: null; lockedBy: string }>(text, 'numbered');
    expect(statement.sql).toBe(`SELECT $1, $2::timestamptz, ':not' || "a:b" || \`c:d\`, '%H:%M', $1, $3`);
    expect(statement.parameters({ lockedBy: 'host', slot: null, name: 'job' })).toEqual(['job', null, 'host']);
  });

  it('gives every use its own ? for MySQL and SQLite, repeating the value', () => {
    const statement = namedStatement<{ name: string; slot: null; lockedBy: string }>(text, 'positional');
    expect(statement.sql).toBe(`SELECT ?, ?::timestamptz, ':not' || "a:b" || \`c:d\`, '%H:%M', ?, ?`);
    expect(statement.parameters({ lockedBy: 'host', slot: null, name: 'job' })).toEqual(['job', null, 'job', 'host']);
  });

  it('lays out only the names the text uses, and throws on one its values lack (a bug, never bound as NULL)', () => {
    const statement = namedStatement<{ name: string; token: string }>('UPDATE t SET a = 1 WHERE name = :name', 'numbered');
    expect(statement.parameters({ name: 'job', token: 'unused' })).toEqual(['job']);
    const missing = namedStatement<{ name: string }>('SELECT :name, :token', 'positional');
    expect(() => missing.parameters({ name: 'job' })).toThrow(/:token/);
  });
});

describe('each dialect recognises its own handles', () => {
  it('picks the dialect of a URL, a driver handle and a Kysely instance by asking each in turn', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://app@127.0.0.1:9/none' });
    const mysqlPool = createPool({ uri: 'mysql://app@127.0.0.1:9/none' });
    const database = new Database(':memory:');
    const cases: [DatabaseInput, string][] = [
      ['postgres://app@host/db', 'postgres'],
      ['mariadb://app@host/db', 'mysql'],
      ['sqlite::memory:', 'sqlite'],
      [pool, 'postgres'],
      [mysqlPool, 'mysql'],
      [mysqlPool.promise(), 'mysql'],
      [database, 'sqlite'],
      [new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) }), 'postgres'],
      [new Kysely<unknown>({ dialect: new MysqlDialect({ pool: mysqlPool }) }), 'mysql'],
      [new Kysely<unknown>({ dialect: new SqliteDialect({ database }) }), 'sqlite'],
    ];
    try {
      for (const [input, name] of cases) expect(dialectOf(input).name).toBe(name);
      // Each dialect claims its own handles only.
      expect(postgresDialect.handles.nativeOf(database)).toBeUndefined();
      expect(mysqlDialect.handles.nativeOf(pool)).toBeUndefined();
      expect(sqliteDialect.handles.nativeOf(mysqlPool)).toBeUndefined();
      // A promise pool is unwrapped to the callback pool the guard's connections use.
      expect(mysqlDialect.handles.nativeOf(mysqlPool.promise())).toBe(mysqlPool);
      expect(sqliteDialect.handles.nativeOf(database)?.get()).toBe(database);
    } finally {
      await pool.end();
      await new Promise((resolve) => mysqlPool.end(resolve));
      database.close();
    }
  });

  it('has the same role-named files in every dialect folder, and at most ten files in each (docs/architecture.md)', () => {
    const dialects = join(repoRoot, 'src', 'dialects');
    const folders = readdirSync(dialects).filter((entry) => entry !== 'common' && statSync(join(dialects, entry)).isDirectory());
    expect(folders.sort()).toEqual(['mysql', 'postgres', 'sqlite']);
    for (const folder of folders) {
      const roles = [
        'batch-acquire.ts',
        'batch-release.ts',
        'connection.ts',
        'dialect.ts',
        'driver-errors.ts',
        'lock-store.ts',
        'schema.ts',
      ];
      roles.push('server-facts.ts', 'statements.ts');
      expect(readdirSync(join(dialects, folder)), folder).toEqual(expect.arrayContaining(roles));
      expect(readdirSync(join(dialects, folder)).length, folder).toBeLessThanOrEqual(10);
    }
  });

  it("uses no Kysely internals: getExecutor() is marked internal, and may change in any release (but for answering the Migrator's own call)", () => {
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((entry) => {
        const path = join(dir, entry);
        return statSync(path).isDirectory() ? files(path) : [path];
      });
    // Code only: comments may name it, to say why it is not used.
    const code = (file: string): string => readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '');
    const users = files(join(repoRoot, 'src')).filter((file) => code(file).includes('getExecutor'));
    // One exception: migration-lease.ts answers the `getExecutor()` call that Kysely's own Migrator
    // (kysely pinned exactly) makes on the instance it is given, to switch the Migrator's session
    // lock off (the lease replaces it). It relies on nothing the Migrator does not rely on itself.
    expect(users).toEqual([join(repoRoot, 'src', 'admin', 'migration-lease.ts')]);
  });
});
