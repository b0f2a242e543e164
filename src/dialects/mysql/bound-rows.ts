import { Buffer } from 'node:buffer';

// The batch statements (batch-acquire.ts, batch-release.ts) take a list of jobs as bound values.
// MySQL 8.0 and MariaDB 10.11 share no table-valued parameter (no unnest, and their VALUES row
// constructors differ), so the list is a derived table of single-row SELECTs joined by UNION ALL,
// one row per job, every value a `?`. Its text depends only on the number of rows: it is built once
// per count and kept, so that each connection prepares it once (mysql2 caches prepared statements).

/** A column of the derived table: its alias, and the SQL that holds its one `?` (a CAST where the type matters). */
export interface BoundColumn {
  readonly alias: string;
  readonly value: string;
}

/** A job name as bytes, compared byte for byte with the VARBINARY name column (and so usable on its primary key). */
export const nameColumn: BoundColumn = { alias: 'name', value: 'CAST(? AS BINARY)' };

/**
 * `count` rows of `columns`, each row also numbered (`i`, from 0, written in: a position, never a
 * value of the user's), as the text of a derived table (without its parentheses).
 */
export function boundRows(columns: readonly BoundColumn[], count: number): string {
  const rows: string[] = [];
  for (let i = 0; i < count; i += 1) rows.push(`SELECT ${i} AS i, ${columns.map(({ alias, value }) => `${value} AS ${alias}`).join(', ')}`);
  return rows.join('\n   UNION ALL ');
}

/** `?, ?, …`: `count` marks, for an IN list. */
export function marks(count: number): string {
  return Array.from({ length: count }, () => '?').join(', ');
}

/**
 * The number of rows a statement is built for: `count` rounded up to a power of two. Each text is a
 * server-side prepared statement on every connection that sends it (mysql2 `execute`), and the server
 * caps them all together (max_prepared_stmt_count, 16,382 by default): a text per exact count could
 * prepare hundreds of texts per connection at 500 jobs; a text per power of two, ten. The rows past
 * `count` are bound NULL (`padded`), which no name, token or IN list matches: they read, take and
 * write nothing.
 */
export function rowsFor(count: number): number {
  return count <= 2 ? count : 2 ** Math.ceil(Math.log2(count));
}

/** `values` (`width` values per row, `count` rows) followed by NULLs for the rows up to `rowsFor(count)`. */
export function padded(values: readonly unknown[], width: number, count: number): unknown[] {
  return [...values, ...new Array<null>((rowsFor(count) - count) * width).fill(null)];
}

/** `build`, remembering its text for each number of rows up to `most` (larger ones are built each time). */
function remembered(build: (count: number) => string, most: number): (count: number) => string {
  const built = new Map<number, string>();
  return (count) => {
    let text = built.get(count);
    if (text === undefined) {
      text = build(count);
      if (count <= most) built.set(count, text);
    }
    return text;
  };
}

/** The exact counts whose `perCount` text is kept: a text per count would otherwise keep growing with the largest batch. */
const COUNTS_REMEMBERED = 16;

/**
 * A statement text for `rowsFor(count)` rows (its values then `padded`), built the first time that
 * number of rows is seen and kept (one text per power of two).
 */
export function perRows(build: (rows: number) => string): (count: number) => string {
  const byRows = remembered(build, Number.POSITIVE_INFINITY);
  return (count) => byRows(rowsFor(count));
}

/**
 * A statement text for exactly `count` rows, for a statement whose rows cannot be padded (an
 * INSERT … VALUES, sent only for names with no row yet, so once in a name's life): kept for the
 * small counts, built each time past them.
 */
export function perCount(build: (count: number) => string): (count: number) => string {
  return remembered(build, COUNTS_REMEMBERED);
}

/** A name's bytes as the server orders and compares them (the primary key's order): the order every batch locks rows in. */
export function byNameBytes<Item>(nameOf: (item: Item) => string): (a: Item, b: Item) => number {
  return (a, b) => Buffer.compare(Buffer.from(nameOf(a), 'utf8'), Buffer.from(nameOf(b), 'utf8'));
}

/** A name read back from the VARBINARY column (mysql2 gives bytes), as the key `nameKey` gives a job's name. */
export function columnNameKey(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString('hex') : Buffer.from(String(value), 'utf8').toString('hex');
}

/** A job name as `columnNameKey` gives it back from the server: its UTF-8 bytes, in hex. */
export function nameKey(name: string): string {
  return Buffer.from(name, 'utf8').toString('hex');
}
