import type * as mysql2 from 'mysql2';
import {
  Kysely,
  MysqlDialect,
  OperationNodeTransformer,
  type KyselyPlugin,
  type MysqlPool,
  type MysqlPoolConnection,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type PrimitiveValueListNode,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
  type ValueNode,
} from 'kysely';
import { loadDriver } from '../common/load-driver.js';
import type { OpenSettings } from '../../core/dialect.js';
import { Buffer } from 'node:buffer';

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

/** ER_NO_SUCH_THREAD: the connection is gone (its statement ended and it was destroyed). */
const NO_SUCH_THREAD = 1094;

type KillCallback = (error: unknown) => void;

/** The part of a mysql2 connection (callback API) the cancel uses. */
interface KillConnection {
  query(sql: string, callback: KillCallback): unknown;
  end(callback: KillCallback): void;
  destroy(): void;
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

/**
 * The acquire statements of one guard's bound pool (`boundParameterPool`), and the server threads
 * running one now, so that shutdown can cut them there (`LockStore.cancelAcquires`).
 * The lock store registers the SQL texts of its acquire's statements, built once; the pool's
 * connections note their server thread id (mysql2 `threadId`) while they run one: a Set add and
 * delete per statement, no round trip. On a Kysely instance passed in the guard never sees the
 * connection, so it cannot cancel: only the server-side bound holds there (innodb_lock_wait_timeout,
 * left as the user set it).
 */
export class AcquireStatements {
  readonly #texts = new Set<string>();
  readonly #running = new Set<number>();
  #cancelling = false;

  /** `connectionConfig`: the pool's own (mysql2 `pool.config.connectionConfig`), for the connection that sends the KILLs. */
  constructor(private readonly connectionConfig: unknown) {}

  /** Marks `sql` (one of the lock store's statements, built once) as part of an acquire. */
  register(sql: string): string {
    this.#texts.add(sql);
    return sql;
  }

  isAcquire(sql: string): boolean {
    return this.#texts.has(sql);
  }

  /** Set once `cancel` has been called: no acquire statement may start, and a connection that ran one is not reused. */
  get cancelling(): boolean {
    return this.#cancelling;
  }

  started(threadId: number): void {
    this.#running.add(threadId);
  }

  finished(threadId: number): void {
    this.#running.delete(threadId);
  }

  /**
   * Refuses every acquire statement from now on, and cuts on the server the ones still running:
   * `KILL QUERY` over a connection of its own (the pool's may all be taken, and the statements
   * to cut hold theirs). A cut statement fails with ER_QUERY_INTERRUPTED and, being one
   * autocommit statement, rolls back: it takes nothing. Its connection is then destroyed rather
   * than reused (see `boundParameterPool`), so a KILL that arrives after its statement ended finds
   * no thread, or one with nothing to cut, never a later statement of the app's.
   */
  async cancel(): Promise<void> {
    this.#cancelling = true;
    // Read now, synchronously: every id here runs an acquire statement at this instant.
    const threadIds = [...this.#running];
    if (threadIds.length === 0) return;
    if (this.connectionConfig === undefined) throw new Error('the pool has no connection settings to open the connection that cancels');
    const { Connection } = loadDriver('mysql2', 'a mysql:// database') as {
      Connection: new (options: { config: unknown }) => KillConnection;
    };
    // As the pool makes its own connections: the same host, user, TLS and timeouts.
    const connection = new Connection({ config: this.connectionConfig });
    // A server that drops this connection must not crash the process through an unheard 'error'.
    connection.on('error', () => undefined);
    let failed = false;
    try {
      for (const threadId of threadIds) {
        // KILL takes no parameters: the id is written in, and only ever a safe integer the driver
        // reported (checked where it is recorded, and again here).
        if (!Number.isSafeInteger(threadId) || threadId <= 0) continue;
        await new Promise<void>((resolve, reject) => {
          connection.query(`KILL QUERY ${threadId}`, (error) => {
            if (error === null || error === undefined || (error as { errno?: unknown }).errno === NO_SUCH_THREAD) resolve();
            else reject(error as Error);
          });
        });
      }
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      // A connection that failed (it may never have connected) is dropped; a sound one says goodbye.
      if (failed) connection.destroy();
      else await new Promise<void>((resolve) => connection.end(() => resolve()));
    }
  }
}

// mysql2's `query(sql, values)` writes the values into the SQL text itself, escaping quotes with
// backslashes. A server whose sql_mode holds NO_BACKSLASH_ESCAPES reads `\'` as a backslash and a
// closing quote, so a job name such as `x\' OR 1=1 -- ` became SQL: `unlock()` freed every lock.
// Everything here keeps values out of the SQL text, whatever the server's sql_mode.

type Callback = (error: unknown, result: never) => void;

/**
 * The most values a statement may bind and stay prepared on its connection. The batch statements
 * (statements.ts) bind a few values per job, so a tick of 1,000 jobs prepares texts of thousands of
 * values; mysql2 keeps every prepared statement of a connection with a description of each of its
 * values, and the fault scenario of 1,000 jobs × 5 bursts saw each replica's heap grow by 10 MB
 * until every connection held every size (texts of 400 KB per connection). A statement past this
 * bound is closed once it has answered: a tick that large prepares its statements again (one round
 * trip each), and what stays cached per connection is the one-job statements and the batches of up
 * to a few dozen jobs.
 */
const MOST_VALUES_KEPT_PREPARED = 128;

/** mysql2's callback connection, as the pool hands it out. */
interface Mysql2Connection {
  /** The server's id of this connection (its thread), from the handshake. */
  readonly threadId?: number | null;
  query(sql: string, values: unknown[], callback: Callback): unknown;
  execute(sql: string, values: unknown[], callback: Callback): unknown;
  /** Closes the prepared statement of `sql` on the server and drops it from the connection's cache. */
  unprepare?(sql: string): unknown;
  release(): void;
  /** Closes it and takes it out of the pool. */
  destroy(): void;
}

/** mysql2's callback pool (`mysql2.createPool`, or a promise pool's `.pool`). */
export interface Mysql2CallbackPool {
  /** The settings the pool opens its connections with (mysql2 `ConnectionConfig`). */
  readonly config?: { readonly connectionConfig?: unknown };
  getConnection(callback: (error: unknown, connection: Mysql2Connection) => void): void;
  end(callback: (error: unknown) => void): void;
}

/**
 * A pool for Kysely's MysqlDriver whose connections send every statement that has parameters as a
 * server-side prepared statement (mysql2 `execute`: the values travel apart from the SQL text, in
 * the binary protocol). mysql2 caches each prepared statement per connection (LRU, its
 * `maxPreparedStatements`), and the guard's statements are a small fixed set, built once; a
 * statement without parameters (DDL, `SELECT 1`) holds no value and goes as text, as some of
 * them cannot be prepared.
 * `acquires`: the acquire statements shutdown may cut; each connection notes its server thread id
 * while it runs one (see AcquireStatements).
 */
export function boundParameterPool(pool: Mysql2CallbackPool, acquires?: AcquireStatements): MysqlPool {
  // One wrapper per connection: Kysely keys its own per-connection state on the object it gets.
  const wrappers = new WeakMap<Mysql2Connection, MysqlPoolConnection>();
  return {
    getConnection(callback) {
      pool.getConnection((error, connection) => {
        if (error !== null && error !== undefined) {
          callback(error, connection as unknown as MysqlPoolConnection);
          return;
        }
        let wrapper = wrappers.get(connection);
        if (wrapper === undefined) {
          wrapper = boundParameterConnection(connection, acquires);
          wrappers.set(connection, wrapper);
        }
        callback(null, wrapper);
      });
    },
    end: (callback) => pool.end(callback),
  };
}

function boundParameterConnection(connection: Mysql2Connection, acquires: AcquireStatements | undefined): MysqlPoolConnection {
  // Whether this checkout ran an acquire statement, which a KILL QUERY may be on its way to.
  let ranAcquire = false;
  return {
    query(sql: string, parameters: unknown[], callback?: Callback) {
      // Kysely streams only when asked to (`.stream()`), which the guard never does.
      if (callback === undefined) throw new TypeError('cronguard: streaming is not supported on its MySQL connections');
      let answer = callback;
      const threadId = connection.threadId;
      if (acquires?.isAcquire(sql) === true && typeof threadId === 'number' && Number.isSafeInteger(threadId)) {
        ranAcquire = true;
        acquires.started(threadId);
        answer = (error, result) => {
          acquires.finished(threadId);
          callback(error, result);
        };
      }
      if (parameters.length === 0) connection.query(sql, parameters, answer);
      else if (parameters.length <= MOST_VALUES_KEPT_PREPARED || connection.unprepare === undefined)
        connection.execute(sql, parameters.map(bindable), answer);
      else {
        const answered = answer;
        connection.execute(sql, parameters.map(bindable), (error, result) => {
          // Not on a connection that has failed (mysql2 marks the error `fatal`): a command added to
          // it is refused with an 'error' event, which a pool passed in may not listen for.
          if ((error as { fatal?: unknown } | null)?.fatal !== true) connection.unprepare?.(sql);
          answered(error, result);
        });
      }
    },
    release() {
      // Once shutdown cancels the acquires, a connection that ran one is closed, not reused: a
      // KILL QUERY sent for its statement would otherwise cut whatever it ran next.
      const destroy = ranAcquire && acquires?.cancelling === true;
      ranAcquire = false;
      if (destroy) connection.destroy();
      else connection.release();
    },
  } as MysqlPoolConnection;
}

/**
 * A value as mysql2 `execute` can bind it on MySQL 8 and MariaDB alike. Integers go as decimal
 * text: mysql2 binds a JS number as a DOUBLE, which MySQL 8.0.22+ refuses for `LIMIT ?` ("Incorrect
 * arguments to mysqld_stmt_execute"), and a BigInt only as text in some versions; the server
 * converts the text wherever an integer is expected (LIMIT, INTERVAL, a BIGINT column). `undefined`
 * is NULL, as `query()` writes it (`execute` refuses it). Dates are never passed: times go as UTC
 * text (`mysqlTime`), as a Date would be written in the connection's time zone.
 */
function bindable(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))) return String(value);
  return value;
}

/**
 * For a Kysely instance passed in by the user, whose driver the guard cannot change: every string
 * parameter becomes its UTF-8 bytes. mysql2 `query()` writes bytes as a hex literal (`X'6a6f62'`),
 * which holds no quote or backslash, so no sql_mode can end it early; a driver that binds (mysql2
 * `execute`) sends them as bytes. The server converts them back to text wherever a text column or
 * a time is expected, and compares them with the column's collation.
 */
export function asByteStrings(parameters: readonly unknown[]): unknown[] {
  return parameters.map((value) => (typeof value === 'string' ? Buffer.from(value, 'utf8') : value));
}

class ByteStringValues extends OperationNodeTransformer {
  protected override transformValue(node: ValueNode): ValueNode {
    const value: unknown = node.value;
    // An immediate value is written into the SQL by Kysely itself: the guard passes none of the user's.
    return typeof value === 'string' && node.immediate !== true
      ? { ...node, value: Buffer.from(value, 'utf8') }
      : super.transformValue(node);
  }

  /** The values of an INSERT whose values are all plain (the migrator's bookkeeping row). */
  protected override transformPrimitiveValueList(node: PrimitiveValueListNode): PrimitiveValueListNode {
    return { ...node, values: asByteStrings(node.values) };
  }
}

/** `asByteStrings` for what goes through Kysely's query builder and `sql` templates (history, locks, prune, migrations). */
export class ByteStringParameters implements KyselyPlugin {
  readonly #values = new ByteStringValues();

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    return this.#values.transformNode(node);
  }

  transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(result);
  }
}
