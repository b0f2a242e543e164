import type { ColumnMetadata, TableMetadata } from 'kysely';

/** One row of a dialect's read of its tables' columns: the column, and the table it belongs to. */
export interface TableColumn {
  readonly table: Omit<TableMetadata, 'columns'>;
  readonly column: ColumnMetadata;
}

/**
 * The tables of a dialect's `findTables`, in the shape of Kysely's introspector, from its rows
 * ordered by table and column position: each table once, with its columns in row order.
 */
export function tablesOfColumns(rows: Iterable<TableColumn>): TableMetadata[] {
  const tables = new Map<string, TableMetadata & { columns: ColumnMetadata[] }>();
  for (const { table, column } of rows) {
    let entry = tables.get(table.name);
    if (entry === undefined) {
      entry = { ...table, columns: [] };
      tables.set(table.name, entry);
    }
    entry.columns.push(column);
  }
  return [...tables.values()];
}
