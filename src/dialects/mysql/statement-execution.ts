import { CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import { namedStatement, type NamedStatement } from '../common/named-parameters.js';
import { asByteStrings } from './bound-parameters.js';
import { acquireStatementsOf, bindsParameters } from './connection.js';

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
   * One CALL of a procedure that runs its own transaction (take-procedure.ts), on one connection,
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
