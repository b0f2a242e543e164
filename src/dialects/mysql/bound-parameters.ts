import { Buffer } from 'node:buffer';
import {
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
import type { AcquireStatements } from './acquire-cancel.js';

// mysql2's `query(sql, values)` writes the values into the SQL text itself, escaping quotes with
// backslashes. A server whose sql_mode holds NO_BACKSLASH_ESCAPES reads `\'` as a backslash and a
// closing quote, so a job name such as `x\' OR 1=1 -- ` became SQL: `unlock()` freed every lock.
// Everything here keeps values out of the SQL text, whatever the server's sql_mode.

type Callback = (error: unknown, result: never) => void;

/**
 * The most values a statement may bind and stay prepared on its connection. The batch statements
 * (bound-rows.ts) bind a few values per job, so a tick of 1,000 jobs prepares texts of thousands of
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
