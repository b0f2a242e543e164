// The same driver and connection settings under the guard and under the floor and reference
// statements: one Kysely over one pool per dialect; raw statements go to that pool directly.
import Database from 'better-sqlite3';
import { CompiledQuery, Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import { createPool, type Pool as MysqlPool } from 'mysql2';
import pg from 'pg';
import type { DialectName } from '../../src/index.js';

export interface BenchDriver {
  readonly dialect: DialectName;
  /** What the guard is given: a Kysely over the pool below, with a log of every statement. */
  readonly kysely: Kysely<unknown>;
  /** Executes SQL with the dialect's placeholders straight through the driver (no Kysely). */
  raw(sql: string, params?: unknown[]): Promise<unknown>;
  /** The SQL the guard sent since the last call (text and parameters). */
  takeLog(): CompiledQuery[];
  close(): Promise<void>;
}

export function openDriver(dialect: DialectName, url: string): BenchDriver {
  const log: CompiledQuery[] = [];
  const logQuery = (event: { level: string; query: CompiledQuery }): void => void (event.level === 'query' && log.push(event.query));
  const takeLog = (): CompiledQuery[] => log.splice(0);
  if (dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    return {
      dialect,
      kysely: new Kysely<unknown>({ dialect: new PostgresDialect({ pool }), log: logQuery }),
      raw: (sql, params = []) => pool.query(sql, params),
      takeLog,
      close: () => pool.end(),
    };
  }
  if (dialect === 'mysql') {
    const pool: MysqlPool = createPool({ uri: url, connectionLimit: 10, timezone: 'Z' });
    const promisePool = pool.promise();
    return {
      dialect,
      kysely: new Kysely<unknown>({ dialect: new MysqlDialect({ pool }), log: logQuery }),
      raw: (sql, params = []) => promisePool.query(sql, params),
      takeLog,
      close: () => promisePool.end(),
    };
  }
  const database = new Database(url.slice('sqlite:'.length));
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  // better-sqlite3 prepares once and reuses: the floor a hand-written app would have.
  const prepared = new Map<string, Database.Statement>();
  return {
    dialect,
    kysely: new Kysely<unknown>({ dialect: new SqliteDialect({ database }), log: logQuery }),
    raw: (sql, params = []) => {
      let statement = prepared.get(sql);
      if (statement === undefined) {
        statement = database.prepare(sql);
        prepared.set(sql, statement);
      }
      return Promise.resolve(statement.reader ? statement.all(...params) : statement.run(...params));
    },
    takeLog,
    close: () => Promise.resolve(void database.close()),
  };
}
