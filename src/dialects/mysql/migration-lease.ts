import { sql } from 'kysely';
import type { MigrationLeaseSql, TableNames } from '../../core/dialect.js';
import { quotedTable } from '../common/quote.js';
import { mysqlCreateTableSuffix } from './schema.js';

const table = (tables: TableNames) => sql.raw(quotedTable(tables, 'migrationLease', '`'));

/**
 * The migration lease on MySQL/MariaDB (core/dialect.ts `MigrationLeaseSql`): a row, so that on
 * Galera it replicates to every node, where GET_LOCK holds on one node only. Times are
 * UTC_TIMESTAMP(3) into DATETIME(3), as every other time of the guard's (docs/schema.md).
 */
export const mysqlMigrationLease: MigrationLeaseSql = {
  // The row is seeded (expired) apart from the take: an INSERT ... ON DUPLICATE KEY UPDATE take
  // would report 1 affected row both for an insert and, under CLIENT_FOUND_ROWS (mysql2's
  // default), for an untouched row, so a loser could not tell it lost. The seed changes nothing
  // when the row exists (`id = id`). Racing CREATEs or seeds on Galera fail at certification with a
  // deadlock (1213) or 1050, which isMigrationRace retries.
  create: (tables) => [
    sql`CREATE TABLE IF NOT EXISTS ${table(tables)} (
      id INT PRIMARY KEY,
      holder CHAR(36) NULL,
      expires_at DATETIME(3) NOT NULL
    ) ${sql.raw(mysqlCreateTableSuffix)}`,
    sql`INSERT INTO ${table(tables)} (id, holder, expires_at) VALUES (1, NULL, '1970-01-02 00:00:00.000')
      ON DUPLICATE KEY UPDATE id = id`,
  ],
  // One UPDATE on the row: with or without CLIENT_FOUND_ROWS its affected count is 1 exactly when
  // the WHERE held (the token is new, so a match always changes the row). On Galera two nodes may
  // both match locally; certification lets one commit and fails the other with a deadlock, which
  // the taker counts as lost.
  take: (tables, token, ttlMs) => sql`UPDATE ${table(tables)}
    SET holder = ${token}, expires_at = UTC_TIMESTAMP(3) + INTERVAL ${ttlMs * 1_000} MICROSECOND
    WHERE id = 1 AND (holder IS NULL OR expires_at < UTC_TIMESTAMP(3))`,
  renew: (tables, token, ttlMs) => sql`UPDATE ${table(tables)}
    SET expires_at = UTC_TIMESTAMP(3) + INTERVAL ${ttlMs * 1_000} MICROSECOND
    WHERE id = 1 AND holder = ${token}`,
  release: (tables, token) => sql`UPDATE ${table(tables)} SET holder = NULL WHERE id = 1 AND holder = ${token}`,
};
