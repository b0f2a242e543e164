// The same driver and connection settings under the guard and under the floor and reference
// statements: one Kysely over one pool per dialect; raw statements go to that pool directly.
import Database from 'better-sqlite3';
import { CompiledQuery, Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import { createPool, type Pool as MysqlPool } from 'mysql2';
import pg from 'pg';
import { createHash } from 'node:crypto';
import type { DatabaseInput, DialectName } from '../../src/index.js';

export interface BenchDriver {
  readonly dialect: DialectName;
  /** A Kysely over the pool below, with a log of every statement. */
  readonly kysely: Kysely<unknown>;
  /**
   * What a measured guard is given, as an app would: the driver's pool or database (MySQL: a Kysely
   * over the pool), with nothing in between, so that no logging is timed.
   */
  readonly guardDatabase: DatabaseInput;
  /** The same connection, with every statement the guard sends logged for `takeLog` (to count and replay them). */
  readonly loggedGuardDatabase: DatabaseInput;
  /** Executes SQL with the dialect's placeholders straight through the driver (no Kysely). */
  raw(sql: string, params?: unknown[]): Promise<unknown>;
  /** As `raw`, as a named prepared statement where the driver has them (PostgreSQL). */
  rawPrepared(sql: string, params: unknown[]): Promise<unknown>;
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
    // The guard's lock statements go to pool.query({ name, text, values }), and its acquires to
    // client.query of a client it checks out (pool.connect(), for the client's pid): log both.
    const logConfig = (config: unknown): void => {
      if (typeof config === 'object' && config !== null && 'text' in config) {
        const { text, values: params } = config as { text: string; values: unknown[] };
        log.push(CompiledQuery.raw(text, params));
      }
    };
    const loggedClient = (client: pg.PoolClient): pg.PoolClient =>
      new Proxy(client, {
        get(target, property) {
          if (property === 'query') {
            return (config: unknown, values?: unknown[]) => {
              logConfig(config);
              return target.query(config as string, values);
            };
          }
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
    const logged = new Proxy(pool, {
      get(target, property) {
        if (property === 'query') {
          return (config: unknown, values?: unknown[]) => {
            logConfig(config);
            return target.query(config as string, values);
          };
        }
        if (property === 'connect') return async () => loggedClient(await target.connect());
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    return {
      dialect,
      kysely: new Kysely<unknown>({ dialect: new PostgresDialect({ pool }), log: logQuery }),
      guardDatabase: pool,
      loggedGuardDatabase: logged,
      raw: (sql, params = []) => pool.query(sql, params),
      rawPrepared: (sql, params) =>
        pool.query({
          name: `replay_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`,
          text: sql,
          values: params,
        }),
      takeLog,
      close: () => pool.end(),
    };
  }
  if (dialect === 'mysql') {
    const pool: MysqlPool = createPool({ uri: url, connectionLimit: 10, timezone: 'Z' });
    const promisePool = pool.promise();
    const kysely = new Kysely<unknown>({ dialect: new MysqlDialect({ pool }), log: logQuery });
    const raw = (sql: string, params: unknown[] = []) => promisePool.query(sql, params);
    return {
      dialect,
      kysely,
      guardDatabase: new Kysely<unknown>({ dialect: new MysqlDialect({ pool }) }),
      loggedGuardDatabase: kysely,
      raw,
      rawPrepared: raw,
      takeLog,
      close: () => promisePool.end(),
    };
  }
  const database = new Database(url.slice('sqlite:'.length));
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  // better-sqlite3 prepares once and reuses: the floor a hand-written app would have.
  const prepared = new Map<string, Database.Statement>();
  const raw = (sql: string, params: unknown[] = []) => {
    let statement = prepared.get(sql);
    if (statement === undefined) {
      statement = database.prepare(sql);
      prepared.set(sql, statement);
    }
    return Promise.resolve(statement.reader ? statement.all(...params) : statement.run(...params));
  };
  const kysely = new Kysely<unknown>({ dialect: new SqliteDialect({ database }), log: logQuery });
  // The guard's lock statements go straight to better-sqlite3: log each execution on the way.
  const logged = new Proxy(database, {
    get(target, property) {
      if (property === 'prepare') {
        return (sql: string) => {
          const statement = target.prepare(sql);
          return new Proxy(statement, {
            get(inner, name) {
              const value: unknown = Reflect.get(inner, name, inner);
              if (name !== 'run' && name !== 'all' && name !== 'get')
                return typeof value === 'function' ? (value as () => unknown).bind(inner) : value;
              return (...params: unknown[]) => {
                log.push(CompiledQuery.raw(sql, params));
                return (value as (...args: unknown[]) => unknown).apply(inner, params);
              };
            },
          });
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    dialect,
    kysely,
    guardDatabase: database,
    loggedGuardDatabase: logged,
    raw,
    rawPrepared: raw,
    takeLog,
    close: () => Promise.resolve(void database.close()),
  };
}
