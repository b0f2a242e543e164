import { createHash } from 'node:crypto';
import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import { cancelPostgresBackends } from './connection.js';

/** How a lock statement runs. */
export interface StatementRunner {
  /**
   * Runs one statement. `cancellable`: an acquire's statement, which `cancelAcquires` may cut.
   */
  query<Row>(text: string, values: unknown[], options?: { cancellable: boolean }): Promise<Row[]>;
  /** Cancels the cancellable statements still running; undefined where the runner cannot (Kysely). */
  readonly cancelAcquires: (() => Promise<void>) | undefined;
}

/** The part of a node-postgres pool client this runner uses. */
interface PoolClient {
  readonly processID?: number | null;
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
  release(destroy?: boolean | Error): void;
  on(event: 'error', listener: () => void): unknown;
  removeListener(event: 'error', listener: () => void): unknown;
}

/**
 * Runs the lock statements. Through node-postgres's own pool when the guard has it, as named
 * prepared statements: each connection parses and plans a statement once, and then only binds and
 * executes it (the acquire is a five-part statement whose planning would otherwise dominate a
 * losing attempt). Through Kysely otherwise (a Kysely instance passed in), which cannot cancel.
 */
export function statementRunner(db: Kysely<unknown>, pool: pg.Pool | undefined): StatementRunner {
  if (pool !== undefined) return poolRunner(pool);
  return {
    query: async <Row>(text: string, values: unknown[]) => (await db.executeQuery<Row>(CompiledQuery.raw(text, values))).rows as Row[],
    cancelAcquires: undefined,
  };
}

function poolRunner(pool: pg.Pool): StatementRunner {
  const names = new Map<string, string>();
  const statement = (text: string, values: unknown[]): { name: string; text: string; values: unknown[] } => {
    let name = names.get(text);
    if (name === undefined) {
      name = `cronguard_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
      names.set(text, name);
    }
    return { name, text, values };
  };
  // The server processes running an acquire's statement now, by their pid: what cancelAcquires cuts.
  const running = new Set<number>();
  let cancelling = false;
  return {
    async query<Row>(text: string, values: unknown[], options?: { cancellable: boolean }): Promise<Row[]> {
      if (options?.cancellable !== true) return (await pool.query(statement(text, values))).rows as Row[];
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
      const pid = typeof client.processID === 'number' ? client.processID : undefined;
      if (pid !== undefined) running.add(pid);
      let failure: Error | undefined;
      try {
        return (await client.query(statement(text, values))).rows as Row[];
      } catch (error) {
        failure = error as Error;
        throw error;
      } finally {
        if (pid !== undefined) running.delete(pid);
        // As pool.query does, a client whose statement failed is not reused. Nor is one that a
        // cancel may still be on its way to: it would cut whatever that connection ran next.
        client.removeListener('error', ignoreError);
        client.release(failure ?? (cancelling ? true : undefined));
      }
    },
    async cancelAcquires() {
      cancelling = true;
      if (running.size > 0) await cancelPostgresBackends(pool, [...running]);
    },
  };
}
