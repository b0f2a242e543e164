import type pg from 'pg';
import { createHash } from 'node:crypto';
import { CompiledQuery, type Kysely } from 'kysely';
import { cancelPostgresStatements, type BackendKey } from './connection.js';
import type { RunOutcome } from '../../core/dialect.js';

/** How a lock statement runs. */
export interface StatementRunner {
  /**
   * Runs one statement. `cancellable`: an acquire's statement, which `cancelAcquires` may cut.
   */
  query<Row>(text: string, values: unknown[], options?: { cancellable: boolean }): Promise<Row[]>;
  /** Cancels the cancellable statements still running; undefined where the runner cannot (Kysely). */
  readonly cancelAcquires: (() => Promise<void>) | undefined;
}

/** A statement as node-postgres takes it: named (prepared once per connection) or unnamed. */
interface StatementConfig {
  name?: string;
  text: string;
  values: unknown[];
}

/** The part of a node-postgres pool client this runner uses. */
interface PoolClient {
  readonly processID?: number | null;
  readonly secretKey?: number | null;
  query(config: StatementConfig): Promise<{ rows: unknown[] }>;
  release(destroy?: boolean | Error): void;
  on(event: 'error', listener: () => void): unknown;
  removeListener(event: 'error', listener: () => void): unknown;
}

/**
 * Runs the lock statements. Through node-postgres's own pool when the guard has it, as named
 * prepared statements: each connection parses and plans a statement once, and then only binds and
 * executes it (the acquire is a five-part statement whose planning would otherwise dominate a
 * losing attempt). Behind a pooler in transaction mode (PgBouncer below 1.21, or without
 * max_prepared_statements) named statements cannot work: the client's connections share server
 * sessions, so a statement is found already prepared (42P05) or missing (26000). The first such
 * error switches the runner to unnamed statements for good (`isNamedStatementLost`). Through
 * Kysely otherwise (a Kysely instance passed in), unnamed, which cannot cancel.
 */
export function statementRunner(db: Kysely<unknown>, pool: pg.Pool | undefined): StatementRunner {
  if (pool !== undefined) return poolRunner(pool);
  return {
    query: async <Row>(text: string, values: unknown[]) => (await db.executeQuery<Row>(CompiledQuery.raw(text, values))).rows as Row[],
    cancelAcquires: undefined,
  };
}

/**
 * duplicate_prepared_statement (42P05) and invalid_sql_statement_name (26000): a named statement met
 * a server session that already had it or never had it, which happens only when the connection's
 * statements move between server sessions (a transaction pooler).
 */
function isNamedStatementLost(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '42P05' || code === '26000';
}

function poolRunner(pool: pg.Pool): StatementRunner {
  const names = new Map<string, string>();
  let unnamed = false;
  const statement = (text: string, values: unknown[]): StatementConfig => {
    if (unnamed) return { text, values };
    let name = names.get(text);
    if (name === undefined) {
      name = `cronguard_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
      names.set(text, name);
    }
    return { name, text, values };
  };
  // Sends one statement, named until a pooler is detected. The retry is safe: both errors come
  // from Parse (the name exists on that server session) or Bind (it does not), before anything of
  // the statement executed, so the retried statement is its first execution. Retried once: the
  // unnamed statement cannot meet either error.
  const send = async (target: { query(config: StatementConfig): Promise<{ rows: unknown[] }> }, text: string, values: unknown[]) => {
    try {
      return (await target.query(statement(text, values))).rows;
    } catch (error) {
      if (unnamed || !isNamedStatementLost(error)) throw error;
      unnamed = true;
      return (await target.query(statement(text, values))).rows;
    }
  };
  // The connections running an acquire's statement now, by the key a cancel request names them
  // with: what cancelAcquires cuts.
  const running = new Set<BackendKey>();
  let cancelling = false;
  return {
    async query<Row>(text: string, values: unknown[], options?: { cancellable: boolean }): Promise<Row[]> {
      if (options?.cancellable !== true) return (await send(pool as unknown as PoolClient, text, values)) as Row[];
      // Once the acquires are being cancelled (shutdown), none starts: it would not be cut.
      if (cancelling) throw new Error('The guard is shutting down: its acquires are cancelled');
      // pool.query's own steps (check out, query, release), with the client in hand for its pid:
      // no extra round trip.
      const client = (await pool.connect()) as unknown as PoolClient;
      // As pool.query does while its statement runs: a connection the server cuts emits 'error' on
      // the client, which must not go unheard (it would crash the process; the pool may be the
      // user's, without our 'connect' listener). The statement itself rejects and says why.
      const ignoreError = (): void => undefined;
      client.on('error', ignoreError);
      const { processID, secretKey } = client;
      const key = typeof processID === 'number' && typeof secretKey === 'number' ? { processID, secretKey } : undefined;
      if (key !== undefined) running.add(key);
      let failure: Error | undefined;
      try {
        return (await send(client, text, values)) as Row[];
      } catch (error) {
        failure = error as Error;
        throw error;
      } finally {
        if (key !== undefined) running.delete(key);
        // As pool.query does, a client whose statement failed is not reused. Nor is one that a
        // cancel may still be on its way to: it would cut whatever that connection ran next.
        client.removeListener('error', ignoreError);
        client.release(failure ?? (cancelling ? true : undefined));
      }
    },
    async cancelAcquires() {
      cancelling = true;
      if (running.size > 0) await cancelPostgresStatements(pool, [...running]);
    },
  };
}

/**
 * The database's time as the lock columns keep it (timestamptz(3), milliseconds), truncated. For
 * what a statement writes as "from now": PostgreSQL rounds a stored time to the nearest
 * millisecond, so a release writing now() could leave lock_until up to 0.5 ms in the future, where
 * the next take (`lock_until <= now()`) and probe (`lock_until > now()`) would still find the lock
 * held: a fifth of the takes right after a release lost so here, and a guard's own next run was
 * skipped as 'locked'. Truncated, a stored "now" is never after the real one (MySQL and SQLite keep
 * milliseconds by truncating too).
 */
export const NOW_IN_MS = `date_trunc('milliseconds', now())`;

// The named parameters of the PostgreSQL lock statements (lock-store.ts), one type per statement
// shape, so that each statement's values can be checked against its text by reading them.

/** The parameters of an acquire's statements (the probe, the take, the full acquire), by name. */
export interface AcquireValues {
  readonly name: string;
  readonly lockAtMostForMs: number;
  readonly lockedBy: string;
  /** The execution's token, and its run's id. */
  readonly token: string;
  readonly slot: Date | null;
  /** acquireTimeout in whole ms, as text for set_config. */
  readonly lockTimeout: string;
}

/** A manual run's take (guard.trigger): the pending request's id instead of a slot. */
export type TriggerValues = Omit<AcquireValues, 'slot'> & { readonly triggerId: string };

export interface ReleaseValues {
  readonly name: string;
  readonly lockAtLeastForMs: number;
  readonly token: string;
  readonly status: RunOutcome['status'];
  readonly error: string | null;
}

export interface ExtendValues {
  readonly name: string;
  readonly durationMs: number;
  readonly token: string;
}

/** The batch probe (batch-acquire.ts): one element per acquire, in the same order. */
export interface BatchProbeValues {
  readonly names: string[];
  readonly slots: (Date | null)[];
}

/** The batch take (batch-acquire.ts): `AcquireValues` as arrays, one element per acquire, in the same order. */
export interface BatchTakeValues extends BatchProbeValues {
  readonly tokens: string[];
  readonly lockAtMostForMs: number[];
  readonly lockedBy: string[];
  readonly lockTimeout: string;
}

/** The batch release (batch-release.ts): `ReleaseValues` as arrays, one element per release, in the same order. */
export interface BatchReleaseValues {
  readonly names: string[];
  readonly tokens: string[];
  readonly lockAtLeastForMs: number[];
  readonly statuses: RunOutcome['status'][];
  readonly errors: (string | null)[];
}
