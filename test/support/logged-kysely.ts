import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type CompiledQuery } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import { sqlitePath } from '../../src/dialects/sqlite/connection.js';
import type { DialectTarget } from './dialects.js';

/** A Kysely on the target's database that keeps every statement it sends (and, with `failed`, those that failed). */
export function loggedKysely(target: DialectTarget, url: string, log: CompiledQuery[], { failed = false } = {}): Kysely<unknown> {
  const logQuery = (event: { level: string; query: CompiledQuery }): void =>
    void ((event.level === 'query' || (failed && event.level === 'error')) && log.push(event.query));
  if (target.name === 'postgres')
    return new Kysely({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }),
      log: logQuery,
    });
  if (target.name === 'mysql')
    return new Kysely({
      dialect: new MysqlDialect({ pool: createPool({ uri: url, connectionLimit: 2 }) }),
      log: logQuery,
    });
  return new Kysely({ dialect: new SqliteDialect({ database: new Database(sqlitePath(url)) }), log: logQuery });
}
