import { sql, type Kysely } from 'kysely';
import type { ColumnTypes } from '../../core/dialect.js';

/**
 * Names are bytes (VARBINARY, 255 four-byte characters) because MySQL's `_bin` collations ignore
 * trailing spaces: 'job' and 'job ' would share a lock. Times are DATETIME(3) filled from
 * UTC_TIMESTAMP(3), never TIMESTAMP, which is read in the session's zone and jumps at DST.
 */
export const mysqlColumnTypes: ColumnTypes = {
  jobName: 'varbinary(1020)',
  timestamp: 'datetime(3)',
  lockedBy: 'varchar(255)',
  token: 'char(36)',
  status: 'varchar(16)',
  bigint: 'bigint',
  boolean: 'boolean',
  text: 'text',
};

export const mysqlCreateTableSuffix = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4';

/** Whether the current database's `table` has `index` (MySQL 8.0 has no CREATE INDEX IF NOT EXISTS). */
export async function mysqlIndexExists(db: Kysely<unknown>, table: string, index: string): Promise<boolean> {
  const { rows } = await sql`SELECT 1 FROM information_schema.statistics
    WHERE table_schema = DATABASE() AND table_name = ${table} AND index_name = ${index} LIMIT 1`.execute(db);
  return rows.length > 0;
}
