import pg from 'pg';

/** A pg pool of the guard's own that counts every statement its clients are asked to run (PostgreSQL's `recordStatements`). */
export interface CountingPool {
  readonly pool: pg.Pool;
  /** Statements asked of the pool's clients so far; `texts` the SQL of each, in order. */
  count(): number;
  readonly texts: readonly string[];
}

export function countingPostgresPool(url: string): CountingPool {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const texts: string[] = [];
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const [config] = args;
      texts.push(typeof config === 'string' ? config : String((config as { text?: unknown } | undefined)?.text ?? ''));
      return query(...args);
    };
  });
  return { pool, count: () => texts.length, texts };
}
