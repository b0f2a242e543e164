import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type pg from 'pg';
import type { TableNames } from '../../core/dialect.js';
import type { Logger } from '../../core/logger.js';
import { loadDriver } from '../common/load-driver.js';
import { probeTransactionPooling } from './server-facts.js';

/**
 * The NOTIFY channel of one guard's tables: a hash of the schema and the lock table, so that two
 * prefixes on one server never wake each other, and short enough for any prefix (a channel name
 * is an identifier: 63 bytes at most, and pg_notify refuses a longer one).
 */
export function triggerChannel(tables: TableNames): string {
  const hash = createHash('sha256')
    .update(`${tables.schema ?? ''}.${tables.locks}`)
    .digest('hex')
    .slice(0, 24);
  return `cronguard_${hash}`;
}

/** Wakes every listening replica of these tables; the payload is the job's name (a bound parameter). */
export async function notifyPostgresTrigger(db: Kysely<unknown>, tables: TableNames, job: string): Promise<void> {
  await sql`SELECT pg_notify(${triggerChannel(tables)}, ${job})`.execute(db);
}

/**
 * LISTEN on a connection of its own (not one of the pool's: it stays open for the guard's life),
 * with the pool's settings. Undefined without a pool of the guard's (a Kysely instance passed in):
 * the replicas then find requests by polling only. Undefined too behind a transaction pooler
 * (`detectTransactionPooling`), said once: there a LISTEN lands on a server session the client
 * does not keep, so it hears nothing, and each notification made PgBouncer drop that server
 * connection ("got packet 'A' from server when not linked").
 */
export async function listenPostgresTriggers(
  native: pg.Pool | undefined,
  tables: TableNames,
  onRequest: () => void,
  lost: (error: unknown) => void,
  logger: Logger,
): Promise<(() => Promise<void>) | undefined> {
  if (native === undefined) return undefined;
  const probe = await probeTransactionPooling(native);
  if (probe.pooled) {
    logger.warn(
      `PostgreSQL: the connections go through a transaction pooler (${probe.reason}), ` +
        'where LISTEN cannot hear notifications: "run now" requests are found by polling every controlPollInterval instead. ' +
        'That is fine: a triggered run starts within that interval rather than at once; nothing else changes.',
    );
    return undefined;
  }
  const { Client } = loadDriver('pg', 'a postgres:// database') as typeof pg;
  const client = new Client(native.options);
  let closing = false;
  // A server that drops this connection must not crash the process through an unheard 'error'.
  client.on('error', (error) => {
    if (!closing) lost(error);
  });
  client.on('end', () => {
    if (!closing) lost(new Error('the LISTEN connection ended'));
  });
  client.on('notification', () => onRequest());
  await client.connect();
  try {
    // The channel is hex from triggerChannel, quoted as an identifier: LISTEN takes no parameter.
    await client.query(`LISTEN "${triggerChannel(tables)}"`);
  } catch (error) {
    closing = true;
    await client.end().catch(() => undefined);
    throw error;
  }
  return async () => {
    closing = true;
    await client.end().catch(() => undefined);
  };
}
