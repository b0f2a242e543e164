import type { Kysely, ColumnMetadata, TableMetadata } from 'kysely';

/**
 * Whether a Kysely instance's dialect is the one whose introspector is `introspector`
 * (PostgresIntrospector, MysqlIntrospector, SqliteIntrospector), asked through Kysely's public
 * `introspection` (which builds one, without connecting): its adapter is reachable only through
 * `getExecutor()`, which Kysely marks internal. A dialect built on one of Kysely's own (a
 * PostgreSQL driver other than pg) uses its introspector too. `instanceof` fails when the app has
 * its own copy of kysely; the class name does not.
 */
export function introspectorIs(db: Kysely<unknown>, introspector: abstract new (...args: never[]) => object): boolean {
  const own = db.introspection;
  return own instanceof introspector || classNameOf(own) === introspector.name;
}

/** The class name of a Kysely instance's introspector, to name a dialect the guard does not speak. */
export function introspectorName(db: Kysely<unknown>): string {
  return classNameOf(db.introspection) ?? 'an unnamed introspector';
}

function classNameOf(value: object): string | undefined {
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

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
