import { CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import { namedStatement, type NamedStatement } from '../common/named-parameters.js';
import { asByteStrings, acquireStatementsOf, bindsParameters } from './connection.js';
import type { RunOutcome } from '../../core/dialect.js';
import { Buffer } from 'node:buffer';

/** ER_DUP_ENTRY */
export const DUPLICATE_KEY = 1062;
/** ER_LOCK_DEADLOCK */
const DEADLOCK = 1213;
/** Attempts of a statement (or a transaction) that InnoDB chose as a deadlock victim. */
const DEADLOCK_ATTEMPTS = 3;

/** A statement with `:name` parameters, sent with `?` marks (laid out once, when the store is built). */
export const statement = <Values extends object>(text: string): NamedStatement<Values> => namedStatement<Values>(text, 'positional');

/** Runs one statement of a transaction (`LockStatements.transaction`): its SQL text with `?` marks, and its values in order. */
export type TransactionStatement = <Row>(sql: string, parameters: readonly unknown[]) => Promise<QueryResult<Row>>;

/** How the MySQL/MariaDB lock statements reach the server. */
export interface LockStatements {
  /** One autocommit statement, sent again when InnoDB rolled it back as a deadlock victim. */
  execute<Row, Values extends object>(named: NamedStatement<Values>, values: Values): Promise<QueryResult<Row>>;
  /** `execute` for a statement whose text is built per number of jobs (`?` marks), with its values in order. */
  run: TransactionStatement;
  /**
   * Several statements in one transaction on one connection, committed together, or rolled back
   * together when `work` rejects. InnoDB rolls a deadlock victim's whole transaction back, so the
   * whole of `work` is run again (not the one statement): `work` must start from nothing each time.
   */
  transaction<Result>(work: (run: TransactionStatement) => Promise<Result>): Promise<Result>;
  /**
   * One CALL of a procedure that runs its own transaction (schema.ts), on one connection,
   * sent again when InnoDB chose it as a deadlock victim. When it fails, a ROLLBACK on that
   * connection before it goes back to the pool: a statement cut by KILL QUERY may end the procedure
   * without its handler, and its transaction must not stay open on a pooled connection.
   */
  call: TransactionStatement;
  /** Marks a statement text as part of an acquire, which shutdown may cut (see `acquireStatementsOf`); returns it. */
  acquireText(sql: string): string;
  /** Cuts the acquire statements running now, and refuses any from now on (`LockStore.cancelAcquires`); undefined through a Kysely instance passed in. */
  readonly cancelAcquires: (() => Promise<void>) | undefined;
}

const ROLLBACK = CompiledQuery.raw('ROLLBACK');

function isDeadlock(error: unknown): boolean {
  return (error as { errno?: unknown }).errno === DEADLOCK;
}

/** `attempt`, made again while InnoDB rolls it back as a deadlock victim, up to DEADLOCK_ATTEMPTS times. */
async function againIfDeadlocked<Result>(attempt: () => Promise<Result>): Promise<Result> {
  for (let made = 1; ; made += 1) {
    try {
      return await attempt();
    } catch (error) {
      if (!isDeadlock(error) || made >= DEADLOCK_ATTEMPTS) throw error;
    }
  }
}

/**
 * Every lock statement goes through here. Replicas creating lock rows and starting runs for many new
 * jobs at once take InnoDB gap and next-key locks in the same index ranges, and InnoDB breaks the
 * resulting deadlocks by rolling one statement (or one transaction) back (seen: 1,000 new jobs fired
 * at once by two replicas). A rolled-back victim had no effect at all, so it is sent again; a victim
 * that gave up instead would leave its job run by nobody for that slot.
 * The parameters are bound (mysql2 `execute`) on the guard's own pool and on a pool passed in;
 * through a Kysely instance passed in, strings go as bytes (see asByteStrings): never as SQL text.
 */
export function lockStatements(db: Kysely<unknown>): LockStatements {
  // The acquire's statements, which shutdown cuts on the server (cancelAcquires, KILL QUERY) when
  // they outlive its timeout. Undefined through a Kysely instance passed in: its connections are
  // the user's driver's, out of the guard's sight; there only the server's lock wait bound holds.
  const acquires = acquireStatementsOf(db);
  const encode = bindsParameters(db) ? (parameters: readonly unknown[]) => [...parameters] : asByteStrings;
  const compile = (sql: string, parameters: readonly unknown[]): CompiledQuery => {
    // Once shutdown cancels the acquires, none of their statements starts: it would not be cut.
    if (acquires?.cancelling === true && acquires.isAcquire(sql)) throw new Error('The guard is shutting down: its acquires are cancelled');
    return CompiledQuery.raw(sql, encode(parameters));
  };
  const run = async <Row>(sql: string, parameters: readonly unknown[]): Promise<QueryResult<Row>> => {
    const compiled = compile(sql, parameters);
    return againIfDeadlocked(() => db.executeQuery<Row>(compiled));
  };
  return {
    execute: <Row, Values extends object>(named: NamedStatement<Values>, values: Values) => run<Row>(named.sql, named.parameters(values)),
    run,
    transaction<Result>(work: (run: TransactionStatement) => Promise<Result>): Promise<Result> {
      // Kysely rolls back when `work` rejects, and commits when it resolves.
      return againIfDeadlocked(() =>
        db
          .transaction()
          .execute((trx) => work(<Row>(sql: string, parameters: readonly unknown[]) => trx.executeQuery<Row>(compile(sql, parameters)))),
      );
    },
    async call<Row>(sql: string, parameters: readonly unknown[]): Promise<QueryResult<Row>> {
      const compiled = compile(sql, parameters);
      return againIfDeadlocked(() =>
        db.connection().execute(async (connection) => {
          try {
            return await connection.executeQuery<Row>(compiled);
          } catch (error) {
            await connection.executeQuery(ROLLBACK).catch(() => undefined);
            throw error;
          }
        }),
      );
    },
    acquireText(sql: string): string {
      acquires?.register(sql);
      return sql;
    },
    cancelAcquires: acquires === undefined ? undefined : () => acquires.cancel(),
  };
}

/** Registers a one-job acquire statement (built once) with `statements`, for the cancel at shutdown. */
export function acquireStatement<Values extends object>(statements: LockStatements, text: string): NamedStatement<Values> {
  const named = statement<Values>(text);
  statements.acquireText(named.sql);
  return named;
}

// The named parameters of the MySQL/MariaDB lock statements (lock-store.ts), one interface per
// statement shape, so that each statement's values can be checked against its text by reading them.

/** A job's lock row, and a slot as DATETIME(3) text in UTC (`mysqlTime`), or null. */
export interface SlotOfJob {
  readonly name: string;
  readonly slot: string | null;
}

/** A job's lock row as held by one execution. */
export interface TokenOfJob {
  readonly name: string;
  readonly token: string;
}

export interface TakeValues extends SlotOfJob, TokenOfJob {
  readonly lockAtMostForMicros: number;
  readonly lockedBy: string;
}

/** A manual run's take (guard.trigger): the pending request's id instead of a slot. */
export interface TriggerValues extends TokenOfJob {
  readonly lockAtMostForMicros: number;
  readonly lockedBy: string;
  readonly triggerId: string;
}

export interface StartValues extends SlotOfJob, TokenOfJob {
  readonly lockAtMostForMs: number;
}

export interface ReleaseValues extends TokenOfJob {
  readonly lockAtLeastForMicros: number;
  readonly status: RunOutcome['status'];
  readonly error: string | null;
}

export interface ExtendValues extends TokenOfJob {
  readonly durationMicros: number;
}

// The batch statements (batch-acquire.ts, batch-release.ts) take a list of jobs as bound values.
// MySQL 8.0 and MariaDB 10.11 share no table-valued parameter (no unnest, and their VALUES row
// constructors differ), so the list is a derived table of single-row SELECTs joined by UNION ALL,
// one row per job, every value a `?`. Its text depends only on the number of rows: it is built once
// per count and kept, so that each connection prepares it once (mysql2 caches prepared statements).

/** A column of the derived table: its alias, and the SQL that holds its one `?` (a CAST where the type matters). */
export interface BoundColumn {
  readonly alias: string;
  readonly value: string;
}

/** A job name as bytes, compared byte for byte with the VARBINARY name column (and so usable on its primary key). */
export const nameColumn: BoundColumn = { alias: 'name', value: 'CAST(? AS BINARY)' };

/**
 * `count` rows of `columns`, each row also numbered (`i`, from 0, written in: a position, never a
 * value of the user's), as the text of a derived table (without its parentheses).
 */
export function boundRows(columns: readonly BoundColumn[], count: number): string {
  const rows: string[] = [];
  for (let i = 0; i < count; i += 1) rows.push(`SELECT ${i} AS i, ${columns.map(({ alias, value }) => `${value} AS ${alias}`).join(', ')}`);
  return rows.join('\n   UNION ALL ');
}

/** `?, ?, …`: `count` marks, for an IN list. */
export function marks(count: number): string {
  return Array.from({ length: count }, () => '?').join(', ');
}

/**
 * The number of rows a statement is built for: `count` rounded up to a power of two. Each text is a
 * server-side prepared statement on every connection that sends it (mysql2 `execute`), and the server
 * caps them all together (max_prepared_stmt_count, 16,382 by default): a text per exact count could
 * prepare hundreds of texts per connection at 500 jobs; a text per power of two, ten. The rows past
 * `count` are bound NULL (`padded`), which no name, token or IN list matches: they read, take and
 * write nothing.
 */
export function rowsFor(count: number): number {
  return count <= 2 ? count : 2 ** Math.ceil(Math.log2(count));
}

/** `values` (`width` values per row, `count` rows) followed by NULLs for the rows up to `rowsFor(count)`. */
export function padded(values: readonly unknown[], width: number, count: number): unknown[] {
  return [...values, ...new Array<null>((rowsFor(count) - count) * width).fill(null)];
}

/** `build`, remembering its text for each number of rows up to `most` (larger ones are built each time). */
function remembered(build: (count: number) => string, most: number): (count: number) => string {
  const built = new Map<number, string>();
  return (count) => {
    let text = built.get(count);
    if (text === undefined) {
      text = build(count);
      if (count <= most) built.set(count, text);
    }
    return text;
  };
}

/** The exact counts whose `perCount` text is kept: a text per count would otherwise keep growing with the largest batch. */
const COUNTS_REMEMBERED = 16;

/**
 * A statement text for `rowsFor(count)` rows (its values then `padded`), built the first time that
 * number of rows is seen and kept (one text per power of two).
 */
export function perRows(build: (rows: number) => string): (count: number) => string {
  const byRows = remembered(build, Number.POSITIVE_INFINITY);
  return (count) => byRows(rowsFor(count));
}

/**
 * A statement text for exactly `count` rows, for a statement whose rows cannot be padded (an
 * INSERT … VALUES, sent only for names with no row yet, so once in a name's life): kept for the
 * small counts, built each time past them.
 */
export function perCount(build: (count: number) => string): (count: number) => string {
  return remembered(build, COUNTS_REMEMBERED);
}

/** A name's bytes as the server orders and compares them (the primary key's order): the order every batch locks rows in. */
export function byNameBytes<Item>(nameOf: (item: Item) => string): (a: Item, b: Item) => number {
  return (a, b) => Buffer.compare(Buffer.from(nameOf(a), 'utf8'), Buffer.from(nameOf(b), 'utf8'));
}

/** A name read back from the VARBINARY column (mysql2 gives bytes), as the key `nameKey` gives a job's name. */
export function columnNameKey(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('hex') : Buffer.from(String(value), 'utf8').toString('hex');
}

/** A job name as `columnNameKey` gives it back from the server: its UTF-8 bytes, in hex. */
export function nameKey(name: string): string {
  return Buffer.from(name, 'utf8').toString('hex');
}

/** A DATETIME(3) literal in UTC: mysql2 would write a Date in the connection's time zone. */
export function mysqlTime(date: Date): string {
  return date.toISOString().slice(0, 23).replace('T', ' ');
}
