import type { Kysely, TableMetadata } from 'kysely';
import type { MigrationContext } from './context.js';

/**
 * One of the guard's tables with its columns, as a migration sees it through `db` (its
 * transaction), or undefined when it does not exist (yet). Through the dialect's `findTables`
 * where it has one (PostgreSQL: Kysely's introspector there reads every schema, and another app's
 * DDL at the same instant failed it; MySQL: it there reads every table of the database), else
 * Kysely's introspector, which there reads one file (SQLite).
 */
export async function existingTable(
  db: Kysely<unknown>,
  { tables, dialect }: MigrationContext,
  name: string,
): Promise<TableMetadata | undefined> {
  const found = dialect.findTables === undefined ? await db.introspection.getTables() : await dialect.findTables(db, tables.schema, [name]);
  return found.find((table) => table.name === name && (tables.schema === undefined || table.schema === tables.schema));
}
