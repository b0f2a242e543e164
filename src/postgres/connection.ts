import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { loadDriver } from '../database/load-driver.js';
import type { OpenSettings } from '../guard/dialect.js';

/** Structural type of a node-postgres `Pool`, so that the public API does not need `@types/pg`. */
export interface PostgresPoolLike {
  connect(): Promise<unknown>;
  query(text: string, values?: unknown[]): Promise<unknown>;
  end(): Promise<void>;
  readonly totalCount: number;
  readonly idleCount: number;
}

export function isPostgresPool(value: object): value is PostgresPoolLike {
  return 'totalCount' in value && 'idleCount' in value && typeof (value as { connect?: unknown }).connect === 'function';
}

/** A pool the guard owns, from a `postgres://` URL. */
export function openPostgres(url: string, { logger }: OpenSettings): { db: Kysely<unknown>; native: unknown } {
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
  return { db: new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) }), native: pool };
}

/** Wraps the user's pool; the guard never ends it. */
export function adoptPostgresPool(pool: PostgresPoolLike): Kysely<unknown> {
  return new Kysely<unknown>({ dialect: new PostgresDialect({ pool: pool as unknown as pg.Pool }) });
}
