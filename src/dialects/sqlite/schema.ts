import type { ColumnTypes, MigrationLeaseSql, TableNames } from '../../core/dialect.js';
import { sql } from 'kysely';
import { quotedTable } from '../common/quote.js';

/**
 * Times are TEXT in UTC, 'YYYY-MM-DDTHH:MM:SS.SSSZ': readable in plain SQL, and in a fixed width so
 * that comparing the text compares the times. TEXT compares byte-wise (BINARY collation).
 */
export const sqliteColumnTypes: ColumnTypes = {
  jobName: 'text',
  timestamp: 'text',
  lockedBy: 'text',
  token: 'text',
  status: 'text',
  bigint: 'integer',
  boolean: 'integer',
  text: 'text',
};

/** A text primary key needs no second b-tree. */
export const sqliteCreateTableSuffix = 'WITHOUT ROWID';

const table = (tables: TableNames) => sql.raw(quotedTable(tables, 'migrationLease', '"'));

/** The database's clock as the fixed-width text every SQLite time column holds (docs/schema.md). */
const NOW = sql.raw(`strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`);
const later = (ttlMs: number) => sql`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`+${ttlMs / 1_000} seconds`})`;

/**
 * The migration lease on SQLite (core/dialect.ts `MigrationLeaseSql`). The file's write lock
 * already serialises migrations; the lease keeps one process migrating at a time here too, so that
 * every dialect runs `migrate()` the same way. Same shape as MySQL's: a seeded row and one UPDATE.
 */
export const sqliteMigrationLease: MigrationLeaseSql = {
  create: (tables) => [
    sql`CREATE TABLE IF NOT EXISTS ${table(tables)} (id integer PRIMARY KEY, holder text, expires_at text NOT NULL)`,
    sql`INSERT OR IGNORE INTO ${table(tables)} (id, holder, expires_at) VALUES (1, NULL, '1970-01-02T00:00:00.000Z')`,
  ],
  // Fixed-width text compares as time. changes() is 1 exactly when the WHERE held.
  take: (tables, token, ttlMs) => sql`UPDATE ${table(tables)} SET holder = ${token}, expires_at = ${later(ttlMs)}
    WHERE id = 1 AND (holder IS NULL OR expires_at < ${NOW})`,
  renew: (tables, token, ttlMs) => sql`UPDATE ${table(tables)} SET expires_at = ${later(ttlMs)} WHERE id = 1 AND holder = ${token}`,
  release: (tables, token) => sql`UPDATE ${table(tables)} SET holder = NULL WHERE id = 1 AND holder = ${token}`,
};
