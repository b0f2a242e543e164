/**
 * How a dialect's driver marks a bound parameter: `$1, $2, …` (PostgreSQL, numbered, one number
 * per value however often it appears) or `?` (MySQL, SQLite: positional, one value per mark).
 */
export type PlaceholderStyle = 'numbered' | 'positional';

/**
 * A statement written with `:name` placeholders, translated once into the driver's own marks, with
 * the function that lays a call's named values out in that order. The translation happens when the
 * lock store is built; a call only builds the array.
 */
export interface NamedStatement<Values extends object> {
  /** The SQL text as the driver receives it (`$n` or `?`). */
  readonly sql: string;
  /** The values in the order the driver binds them. */
  parameters(values: Values): unknown[];
}

// A quoted literal or identifier (skipped whole: a `:` inside a string such as '%H:%M' is text),
// PostgreSQL's `::` cast (skipped), or a placeholder `:name`.
const TOKEN = /'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|::|:([A-Za-z_][A-Za-z0-9_]*)/g;

/**
 * Translates `text`'s `:name` placeholders into `style`'s marks. `Values` names the statement's
 * parameters and their types; a name in the text that the values object does not hold is a bug,
 * and `parameters` throws on it rather than bind NULL.
 */
export function namedStatement<Values extends object>(text: string, style: PlaceholderStyle): NamedStatement<Values> {
  /** The name behind each value the driver binds, in its order. */
  const order: string[] = [];
  const sql = text.replace(TOKEN, (token: string, name: string | undefined) => {
    if (name === undefined) return token;
    if (style === 'positional') {
      order.push(name);
      return '?';
    }
    let index = order.indexOf(name);
    if (index < 0) index = order.push(name) - 1;
    return `$${index + 1}`;
  });
  return {
    sql,
    parameters(values: Values): unknown[] {
      const named = values as Record<string, unknown>;
      return order.map((name) => {
        if (!(name in named)) throw new Error(`cronguard: no value for the SQL parameter :${name}`);
        return named[name];
      });
    },
  };
}
