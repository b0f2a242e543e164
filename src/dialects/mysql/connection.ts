import { Kysely, MysqlDialect } from 'kysely';
import type * as mysql2 from 'mysql2';
import { loadDriver } from '../common/load-driver.js';
import type { OpenSettings } from '../../core/dialect.js';
import { AcquireStatements } from './acquire-cancel.js';
import { boundParameterPool, ByteStringParameters, type Mysql2CallbackPool } from './bound-parameters.js';

/**
 * The Kysely instances whose pool binds every parameter (`boundParameterPool`): the guard's own and
 * adopted pools, with the acquire statements running on their connections.
 */
const boundDatabases = new WeakMap<Kysely<unknown>, AcquireStatements>();

/** Whether `db` sends parameters apart from the SQL text; if not, the lock statements pass strings as bytes (`asByteStrings`). */
export function bindsParameters(db: Kysely<unknown>): boolean {
  return boundDatabases.has(db);
}

/** The acquire statements of `db`'s pool, which shutdown can cut; undefined for a Kysely instance passed in. */
export function acquireStatementsOf(db: Kysely<unknown>): AcquireStatements | undefined {
  return boundDatabases.get(db);
}

function boundKysely(pool: Mysql2CallbackPool): Kysely<unknown> {
  const acquires = new AcquireStatements(pool.config?.connectionConfig);
  const db = new Kysely<unknown>({ dialect: new MysqlDialect({ pool: boundParameterPool(pool, acquires) }) });
  boundDatabases.set(db, acquires);
  return db;
}

/**
 * The session settings of the guard's own connections, sent once when each connects (before any
 * statement of the guard on it: mysql2 runs a connection's commands in order).
 * innodb_lock_wait_timeout (row locks) and lock_wait_timeout (metadata locks): a statement
 * waiting behind another connection's lock gives up on the server by itself, after acquireTimeout
 * rounded up to whole seconds (at least 1), so a take the guard has given up on cannot commit
 * much later. The server defaults (50 s, and a year for metadata locks) outlived the guard's
 * shutdown and left a late take holding the lock for lockAtMostFor.
 * The isolation level is left as the server has it: every lock statement is one autocommit
 * statement whose UPDATE/INSERT reads the latest committed row whatever the level (and the probe
 * is a fresh consistent read), and deadlocks from REPEATABLE READ's gap locks are retried
 * (lock-store.ts); test/mysql-server-settings.test.ts races processes under SERIALIZABLE and
 * REPEATABLE READ. Pinning READ COMMITTED would break every write on a server that logs its
 * binlog in STATEMENT format (InnoDB refuses it there).
 * The value is an integer computed here, not text from outside; SET takes no parameters on every
 * server, so it is written in. Valid on MySQL 8.0 and MariaDB 10.11.
 */
export function mysqlSessionSettings(acquireTimeoutMs: number): string[] {
  const seconds = Math.max(1, Math.ceil(acquireTimeoutMs / 1_000));
  if (!Number.isSafeInteger(seconds)) throw new RangeError(`lock wait timeout out of range: ${seconds}`);
  return [`SET SESSION innodb_lock_wait_timeout = ${seconds}, lock_wait_timeout = ${seconds}`];
}

/** A pool the guard owns, from a `mysql://` URL. */
export function openMysql(url: string, { logger, acquireTimeoutMs }: OpenSettings): { db: Kysely<unknown>; native: mysql2.Pool } {
  const { createPool } = loadDriver('mysql2', 'a mysql:// database') as typeof mysql2;
  const pool = createPool({
    uri: url,
    connectionLimit: 10,
    // A down database must fail an acquire quickly (the run is skipped), not hang the tick.
    connectTimeout: 5_000,
    // DATETIME columns hold UTC; read them as UTC, never in the process's zone.
    timezone: 'Z',
    charset: 'utf8mb4',
  });
  const settings = mysqlSessionSettings(acquireTimeoutMs);
  pool.on('connection', (connection) => {
    connection.on('error', (error: Error) => logger.error(`MySQL connection error: ${error.message}`));
    for (const statement of settings) {
      connection.query(statement, (error: Error | null) => {
        if (error !== null) logger.error(`MySQL session setting failed (${statement}): ${error.message}`);
      });
    }
  });
  return { db: boundKysely(pool as unknown as Mysql2CallbackPool), native: pool };
}

/** Wraps the user's callback pool; the guard never ends it, and leaves its sessions' settings alone. */
export function adoptMysqlPool(pool: mysql2.Pool): Kysely<unknown> {
  return boundKysely(pool as unknown as Mysql2CallbackPool);
}

/**
 * A Kysely instance passed in: its driver is the user's (Kysely's MysqlDialect writes values into
 * the SQL text with mysql2 `query()`), so every string the guard sends through it goes as bytes
 * (`ByteStringParameters`), which no sql_mode can turn into SQL.
 */
export function adoptMysqlKysely(db: Kysely<unknown>): Kysely<unknown> {
  return db.withPlugin(new ByteStringParameters());
}
