import { sql, type Kysely, type TableMetadata } from 'kysely';
import type { ColumnTypes } from '../../core/dialect.js';
import { tablesOfColumns } from '../common/table-metadata.js';

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

interface ColumnRow {
  table_name: string;
  table_schema: string;
  table_type: string | null;
  column_name: string;
  data_type: string;
  is_nullable: string;
  extra: string;
  column_default: string | null;
  column_comment: string;
}

/**
 * The tables among `names` in the current database, with their columns, in the shape of Kysely's
 * introspector. Kysely's own (MysqlIntrospector.getTables) reads every column of every table in
 * the database: MariaDB opens each table's definition for it, so one read took ~0.6 s beside 280
 * tables, Kysely's migrator reads it several times per `migrate()`, and replicas migrating at
 * once wait for each other's (8 processes took over a minute in CI's shared test database).
 */
export async function mysqlFindTables(
  db: Kysely<unknown>,
  _schema: string | undefined,
  names: readonly string[],
): Promise<TableMetadata[]> {
  if (names.length === 0) return [];
  // One SELECT per name, joined by UNION ALL, each filtered by `TABLE_SCHEMA = DATABASE()` and
  // `TABLE_NAME = ?`: with both equalities MariaDB opens that one table's definition ("Scanned 0
  // databases" in EXPLAIN); an IN list or a join to information_schema.tables makes it scan the
  // whole database. The table type comes from a subquery with the same two equalities, for that
  // reason. MySQL 8.0 reads its data dictionary either way.
  const perName = names.map(
    (name) => sql`SELECT c.TABLE_NAME AS table_name, c.TABLE_SCHEMA AS table_schema,
        (SELECT t.TABLE_TYPE FROM information_schema.tables t WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = ${name}) AS table_type,
        c.COLUMN_NAME AS column_name, c.DATA_TYPE AS data_type, c.IS_NULLABLE AS is_nullable, c.EXTRA AS extra,
        c.COLUMN_DEFAULT AS column_default, c.COLUMN_COMMENT AS column_comment, c.ORDINAL_POSITION AS position
      FROM information_schema.columns c WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME = ${name}`,
  );
  const { rows } = await sql<ColumnRow>`${sql.join(perName, sql` UNION ALL `)} ORDER BY table_name, position`.execute(db);
  return tablesOfColumns(
    rows.map((row) => ({
      table: { name: row.table_name, schema: row.table_schema, isView: row.table_type === 'VIEW' },
      column: {
        name: row.column_name,
        dataType: row.data_type,
        isNullable: row.is_nullable === 'YES',
        isAutoIncrementing: row.extra.toLowerCase().includes('auto_increment'),
        hasDefaultValue: row.column_default !== null,
        ...(row.column_comment === '' ? {} : { comment: row.column_comment }),
      },
    })),
  );
}
