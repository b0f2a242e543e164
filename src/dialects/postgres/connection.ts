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

/**
 * Cancels the statements the server processes `pids` are running (each rolls back), over a
 * connection of its own: the pool's may all be taken by the very statements to cancel. A role may
 * cancel its own sessions' statements (pg_cancel_backend); the connection's user is the pool's.
 */
export async function cancelPostgresBackends(pool: pg.Pool, pids: number[]): Promise<void> {
  const { Client } = loadDriver('pg', 'a postgres:// database') as typeof pg;
  const client = new Client(pool.options);
  // A server that drops this connection must not crash the process through an unheard 'error'.
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('SELECT pg_cancel_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
  } finally {
    await client.end();
  }
}
