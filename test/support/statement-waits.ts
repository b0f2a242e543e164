import { expect } from 'vitest';
import type { RawDatabase } from './raw-database.js';

/**
 * Resolves once exactly one statement whose text is `LIKE` the pattern is on the server, waiting
 * (for a row another session is writing): PostgreSQL's `pg_stat_activity` with a `Lock` wait;
 * MySQL's processlist, which lists a statement while it runs (MariaDB's `innodb_trx` shows such a
 * wait late). `admin` is a connection of its own: PostgreSQL reads `pg_stat_activity` once per
 * transaction.
 */
export async function untilStatementWaits(admin: RawDatabase, dialect: 'postgres' | 'mysql', like: string): Promise<void> {
  const sql =
    dialect === 'postgres'
      ? `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ?`
      : 'SELECT 1 FROM information_schema.processlist WHERE info LIKE ?';
  await expect.poll(async () => (await admin.query(sql, [like])).length, { timeout: 10_000 }).toBe(1);
}
