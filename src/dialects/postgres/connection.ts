import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { loadDriver } from '../common/load-driver.js';
import type { OpenSettings } from '../../core/dialect.js';

/** A pool the guard owns, from a `postgres://` URL; `close` ends it whether or not Kysely ever used it. */
export function openPostgres(url: string, { logger }: OpenSettings): { db: Kysely<unknown>; native: pg.Pool; close: () => Promise<void> } {
  const { Pool } = loadDriver('pg', 'a postgres:// database') as typeof pg;
  const pool = new Pool({
    connectionString: url,
    max: 10,
    // A down database must fail an acquire quickly (the run is skipped), not hang the tick.
    connectionTimeoutMillis: 5_000,
    // A guard's statements come in bursts at schedule ticks, often a minute apart. pg closes idle
    // connections after 10 s by default, so every tick connected again (and prepared its
    // statements again) while all its jobs fired at once: 600 ms from a minute's tick to a job's
    // start in the bench, against 250 ms for a scheduler whose connections stay busy. Idle
    // connections now outlive a once-a-minute schedule, and never keep the process alive.
    idleTimeoutMillis: 70_000,
    allowExitOnIdle: true,
    // TCP keep-alive: a server that vanished without closing the connection is noticed.
    keepAlive: true,
    application_name: 'cronguard',
  });
  // An idle client that loses its server emits 'error' on the pool; unheard, it crashes the process.
  pool.on('error', (error) => logger.error(`PostgreSQL pool error: ${error.message}`));
  // A checked-out client has no listener of pg-pool's (it removes its own at checkout): when the
  // server cuts that connection (a restart, a failover, pg_terminate_backend), pg emits 'error' on
  // the client, and unheard that event crashed the process. The statement in flight fails as a
  // call and says why; the pool drops the dead client when it comes back. Nothing to log here.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  // Kysely ends the pool only if a query went through it (its driver initialises lazily), and the
  // lock statements use the pool directly: a guard that never migrated would leave it open.
  const close = async (): Promise<void> => {
    await db.destroy();
    if (!pool.ending) await pool.end();
  };
  return { db, native: pool, close };
}

/** A backend as the protocol's cancel request names it: its process id and secret key (BackendKeyData). */
export interface BackendKey {
  readonly processID: number;
  readonly secretKey: number;
}

/** The part of node-postgres's Connection a cancel request uses (not in its type declarations). */
interface CancelConnection {
  connect(port: number, host: string | undefined): void;
  connect(path: string): void;
  requestSsl(): void;
  cancel(processID: number, secretKey: number): void;
  on(event: 'connect' | 'sslconnect' | 'end', listener: () => void): unknown;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  readonly stream: { destroy(): void };
}

/** How long one cancel request may take: the server answers it by closing the connection. */
const CANCEL_TIMEOUT_MS = 5_000;

/**
 * Cancels the statements running on the connections `keys` name (each rolls back), by the
 * protocol's cancel request: a new connection to the same host and port that sends the backend's
 * process id and secret key, and which the server closes. Not `pg_cancel_backend(pid)`: behind
 * PgBouncer the process id and key the client holds are PgBouncer's, which forwards the request to
 * the server session running that client's statement now, whereas a pid in SQL names no server
 * process there. It also needs no free connection of the pool's (they may all be taken by the very
 * statements to cancel) and no privilege.
 */
export async function cancelPostgresStatements(pool: pg.Pool, keys: readonly BackendKey[]): Promise<void> {
  const { Client } = loadDriver('pg', 'a postgres:// database') as typeof pg;
  await Promise.all(
    keys.map(async ({ processID, secretKey }) => {
      // A Client parses the pool's settings (connectionString, host, port, ssl) as the pool's own
      // connections do; only its unopened Connection is used, to send the request.
      const settings = new Client(pool.options) as unknown as { host: string; port: number; ssl: unknown; connection: CancelConnection };
      const connection = settings.connection;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          connection.stream.destroy();
          reject(new Error(`the cancel request got no answer within ${CANCEL_TIMEOUT_MS} ms`));
        }, CANCEL_TIMEOUT_MS);
        const done = (error?: unknown): void => {
          clearTimeout(timer);
          if (error === undefined) resolve();
          else reject(error instanceof Error ? error : new Error(String(error)));
        };
        const send = (): void => connection.cancel(processID, secretKey);
        // As node-postgres connects: TLS first when the pool uses it, then the request.
        connection.on('connect', () => (settings.ssl ? connection.requestSsl() : send()));
        connection.on('sslconnect', send);
        connection.on('end', () => done());
        connection.on('error', (error) => done(error));
        if (settings.host.startsWith('/')) connection.connect(`${settings.host}/.s.PGSQL.${settings.port}`);
        else connection.connect(settings.port, settings.host);
      });
    }),
  );
}
