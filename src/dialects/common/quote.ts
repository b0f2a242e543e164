import type { TableNames } from '../../core/dialect.js';

type TableKey = Exclude<keyof TableNames, 'schema'>;

/**
 * A table's name for SQL text. The parts are identifiers already validated by `resolveTableNames`;
 * quoting them is a second fence, not the first.
 */
export function quotedTable(tables: TableNames, key: TableKey, quote: '"' | '`'): string {
  const table = `${quote}${tables[key]}${quote}`;
  return tables.schema === undefined ? table : `${quote}${tables.schema}${quote}.${table}`;
}
