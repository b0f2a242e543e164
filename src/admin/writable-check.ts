import { sql, type Kysely } from 'kysely';
import type { Dialect, TableNames } from '../core/dialect.js';
import { readOnlyDatabaseError } from '../core/read-only.js';
import { quotedTable } from '../dialects/common/quote.js';
import type { GuardError } from '../core/errors.js';

/**
 * The `READ_ONLY_DATABASE` error for a migration the server refused as read-only, else undefined.
 * Asks the server which kind it is, to say so (a failed ask leaves both named).
 */
export async function readOnlyMigration(db: Kysely<unknown>, dialect: Dialect, error: unknown): Promise<GuardError | undefined> {
  if (!dialect.isReadOnly(error)) return undefined;
  const kind = await dialect.readOnlyKind?.(db).catch(() => undefined);
  return readOnlyDatabaseError('Migrating the cronguard tables failed', kind, error);
}

/**
 * Rejects with the driver's read-only error where the server refuses writes to the lock table. On tables
 * that are up to date, a migration writes nothing, so a standby or a read-only server would pass
 * `migrate()` ("tables are up to date") and fail every acquire after: this write fails there.
 * Without a lock table (the first migrate), the migration's CREATE TABLE fails the same way.
 */
export async function assertWritable(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<void> {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  try {
    // Changes no row and takes no row lock (no row matches), but is a write: PostgreSQL rejects
    // it in a read-only transaction (a standby is one), MySQL under read_only for a user without
    // the privilege to bypass it, as it would the acquire.
    await sql`UPDATE ${locks} SET name = name WHERE 1 = 0`.execute(db);
  } catch (error) {
    // Rethrown as it is: runMigrations says READ_ONLY_DATABASE for it (readOnlyMigration).
    if (!dialect.isMissingTable(error)) throw error;
  }
}
