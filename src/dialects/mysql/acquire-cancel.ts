import { loadDriver } from '../common/load-driver.js';

/** ER_NO_SUCH_THREAD: the connection is gone (its statement ended and it was destroyed). */
const NO_SUCH_THREAD = 1094;

type Callback = (error: unknown) => void;

/** The part of a mysql2 connection (callback API) the cancel uses. */
interface KillConnection {
  query(sql: string, callback: Callback): unknown;
  end(callback: Callback): void;
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
