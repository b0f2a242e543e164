import type Database from 'better-sqlite3';
import { CompiledQuery, type Kysely } from 'kysely';
import { msToNearestDeadline } from '../../core/execution-context.js';
import { namedStatement, type NamedStatement } from '../common/named-parameters.js';

/** What a statement returned: its rows (RETURNING, SELECT) and the rows it changed. */
export interface StatementResult {
  readonly rows: unknown[];
  readonly changes: number;
}

export type RunStatement = (statement: CompiledQuery) => Promise<StatementResult>;

/**
 * The statements of one transaction, as a generator: it yields each statement and receives its
 * result. The native runner drives it synchronously, so that nothing else on this thread runs
 * between BEGIN and COMMIT: another connection of this process that asked for the write lock
 * meanwhile would block the thread in its busy wait while this one holds the lock, and both would
 * stall for the whole busy timeout.
 */
export type TransactionBody<T> = Generator<CompiledQuery, T, StatementResult>;

/** How the SQLite lock statements reach the database. */
export interface SqliteRunner {
  /** Whether each call runs to its end before it returns (better-sqlite3 itself), rather than across awaits (Kysely). */
  readonly synchronous: boolean;
  /** Runs the body in one BEGIN IMMEDIATE transaction, rolled back if it throws. */
  transaction<T>(body: () => TransactionBody<T>): Promise<T>;
  /** One statement in autocommit. */
  execute: RunStatement;
  /**
   * One write statement in autocommit: its own transaction, which takes the write lock when the
   * statement starts (waiting the busy timeout, as BEGIN IMMEDIATE does). Refused, as `transaction`
   * is, inside a transaction someone else opened on the connection: it would commit with theirs.
   */
  write: RunStatement;
}

/**
 * The SQLite dialect's native handle: the better-sqlite3 `Database`, behind a getter so that one
 * the guard opens from a URL is opened at the first statement (a `Database` passed in is there).
 */
export interface LazySqliteDatabase {
  get(): Database.Database;
}

/**
 * Straight through better-sqlite3, each statement prepared once and reused. Kysely's driver
 * prepares every statement on every call: on the hot path that was most of the time, and native
 * memory grew with every prepared-and-dropped statement. Each statement, and each transaction from
 * BEGIN to COMMIT, runs synchronously before the call returns, so two guards sharing the
 * `Database` can never interleave on it, with no queue and no promise until the answer. A
 * transaction the app (or Kysely) holds open on the same connection makes the acquire fail, with
 * a message that says so, rather than commit or roll back someone else's work.
 */
export function nativeRunner(database: () => Database.Database): SqliteRunner {
  const statements = new Map<string, Database.Statement>();
  const run = (query: CompiledQuery): StatementResult => {
    const db = database();
    let statement = statements.get(query.sql);
    if (statement === undefined) {
      statement = db.prepare(query.sql);
      statements.set(query.sql, statement);
    }
    const parameters = query.parameters as unknown[];
    if (statement.reader) return { rows: statement.all(...parameters), changes: 0 };
    return { rows: [], changes: statement.run(...parameters).changes };
  };
  const refuseForeignTransaction = (db: Database.Database): void => {
    if (db.inTransaction) {
      throw new Error('the SQLite connection is inside a transaction someone else opened; give the guard its own connection');
    }
  };
  const transaction = <T>(body: () => TransactionBody<T>): T => {
    const db = database();
    refuseForeignTransaction(db);
    // Synchronous from BEGIN to COMMIT.
    run(BEGIN);
    try {
      const steps = body();
      let step = steps.next();
      while (step.done !== true) step = steps.next(run(step.value));
      run(COMMIT);
      return step.value;
    } catch (error) {
      if (db.inTransaction) run(ROLLBACK);
      throw error;
    }
  };
  /**
   * better-sqlite3 waits for another connection's write lock synchronously, up to the busy
   * timeout, and no timer fires meanwhile: not a running execution's deadline signal, nor its
   * keep-alive. So a wait is cut to the time left to the nearest such deadline in this process,
   * and the statement fails as a lock-wait timeout rather than hold the signal past the expiry.
   */
  const boundedWait = <T>(work: () => T): T => {
    const leftMs = msToNearestDeadline();
    if (leftMs === Number.POSITIVE_INFINITY) return work();
    const db = database();
    // The connection's own busy timeout: acquireTimeout for a guard opened from a URL, or whatever
    // the app set on a Database it passed in (read each time: the app may change it).
    const busyTimeoutMs = db.pragma('busy_timeout', { simple: true }) as number;
    if (leftMs >= busyTimeoutMs) return work();
    db.pragma(`busy_timeout = ${Math.floor(leftMs)}`);
    try {
      return work();
    } finally {
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    }
  };
  return {
    synchronous: true,
    execute: (query) => settled(() => boundedWait(() => run(query))),
    write: (query) =>
      settled(() =>
        boundedWait(() => {
          refuseForeignTransaction(database());
          return run(query);
        }),
      ),
    transaction: (body) => settled(() => boundedWait(() => transaction(body))),
  };
}

/** Through Kysely's connection (a Kysely instance passed in): its mutex keeps the transaction whole. */
export function kyselyRunner(db: Kysely<unknown>): SqliteRunner {
  const runOn =
    (executor: Pick<Kysely<unknown>, 'executeQuery'>): RunStatement =>
    async (statement) => {
      const result = await executor.executeQuery(statement);
      return { rows: result.rows as unknown[], changes: Number(result.numAffectedRows ?? 0n) };
    };
  return {
    synchronous: false,
    execute: runOn(db),
    // Kysely's connection mutex holds a statement outside a transaction until the transaction ends.
    write: runOn(db),
    transaction: (body) =>
      db.connection().execute(async (connection) => {
        const run = runOn(connection);
        await run(BEGIN);
        try {
          const steps = body();
          let step = steps.next();
          while (step.done !== true) step = steps.next(await run(step.value));
          await run(COMMIT);
          return step.value;
        } catch (error) {
          await run(ROLLBACK).catch(() => undefined);
          throw error;
        }
      }),
  };
}

/** A synchronous call's result or error, as a settled promise. */
function settled<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}

const BEGIN = CompiledQuery.raw('BEGIN IMMEDIATE');
const COMMIT = CompiledQuery.raw('COMMIT');
const ROLLBACK = CompiledQuery.raw('ROLLBACK');

// What every SQLite lock statement's text is built from (lock-store.ts, batch-acquire.ts,
// batch-release.ts): the clock reading, durations as date modifiers, named parameters.

/** UTC with milliseconds and a fixed width, so that text order is time order. */
export const NOW = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;

/** A SQLite date modifier adding a duration: '+1.5 seconds'. */
export function plusSeconds(ms: number): string {
  return `+${ms / 1_000} seconds`;
}

/** A statement with `:name` parameters, sent with `?` marks (laid out once, when the store is built). */
export function statement<Values extends object>(text: string): NamedStatement<Values> {
  return namedStatement<Values>(text, 'positional');
}

/** One call of a statement, with its values in the statement's order. */
export function call<Values extends object>(named: NamedStatement<Values>, values: Values): CompiledQuery {
  return CompiledQuery.raw(named.sql, named.parameters(values));
}

// The named parameters of the SQLite lock statements (lock-store.ts), one type per statement
// shape, so that each statement's values can be checked against its text by reading them.

/** A job's lock row, and a slot as ISO text in UTC, or null. */
export interface SlotOfJob {
  readonly name: string;
  readonly slot: string | null;
}

/** A job's lock row as held by one execution; the token is also its run's id. */
export interface TokenOfJob {
  readonly name: string;
  readonly token: string;
}

/** The run a winner starts, or a skipped one. */
export interface RunValues extends SlotOfJob, TokenOfJob {
  readonly lockedBy: string;
  readonly lockAtMostForMs: number;
}

// The batch statements (batch-acquire.ts, batch-release.ts) read their jobs from one JSON text,
// an array with one element per job (json_each): a bound value, never SQL text.

/** The probe of many jobs: elements `{ name, slot }`. */
export interface BatchProbeValues {
  readonly requests: string;
}

/** The take of many jobs: elements `{ name, token, slot, lockAtMostFor }`, and the guard's lockedBy. */
export interface BatchTakeValues {
  readonly requests: string;
  readonly lockedBy: string;
}

/** Why the losers of a take lost: elements `{ name, slot }`. */
export interface BatchLossValues {
  readonly losers: string;
}

/** The runs the winners took over from: an array of their tokens. */
export interface BatchAbandonValues {
  readonly previousTokens: string;
}

/** The winners' run rows: elements `{ name, token, slot, startedAt, lockUntil, lockAtMostForMs }`. */
export interface BatchStartValues {
  readonly winners: string;
  readonly lockedBy: string;
}

/** The releases of many jobs: elements `{ name, token, lockAtLeastFor }`. */
export interface BatchReleaseValues {
  readonly releases: string;
}

/** The run rows the releases finish: elements `{ token, status, error, released }`. */
export interface BatchFinishValues {
  readonly finishes: string;
}
