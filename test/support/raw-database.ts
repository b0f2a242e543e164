import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { DialectName } from '../../src/index.js';
import { sqlitePath } from '../../src/dialects/sqlite/connection.js';

/** A plain driver connection for looking at the tables behind the guard's back. */
export interface RawDatabase {
  /** Runs SQL with `?` placeholders (rewritten to $n on PostgreSQL); returns the rows. */
  query<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<Row[]>;
  /** Runs a script of several statements, without parameters. */
  exec(script: string): Promise<void>;
  close(): Promise<void>;
}

export async function openRaw(dialect: DialectName, url: string): Promise<RawDatabase> {
  if (dialect === 'postgres') {
    const client = new pg.Client({ connectionString: url });
    // A server stopped under this connection: its queries reject; the event must not crash the test.
    client.on('error', () => undefined);
    await client.connect();
    return {
      async query<Row>(sql: string, params: unknown[] = []) {
        let n = 0;
        const text = sql.replace(/\?/g, () => `$${(n += 1)}`);
        return (await client.query(text, params)).rows as Row[];
      },
      exec: async (script) => void (await client.query(script)),
      close: () => client.end(),
    };
  }
  if (dialect === 'mysql') {
    const connection = await mysql.createConnection({ uri: url, timezone: 'Z', multipleStatements: true });
    connection.on('error', () => undefined);
    return {
      async query<Row>(sql: string, params: unknown[] = []) {
        const [rows] = await connection.query(sql, params);
        return (Array.isArray(rows) ? rows : []) as Row[];
      },
      exec: async (script) => void (await connection.query(script)),
      close: () => connection.end(),
    };
  }
  const database = new Database(sqlitePath(url));
  return {
    query<Row>(sql: string, params: unknown[] = []) {
      const statement = database.prepare(sql);
      return Promise.resolve((statement.reader ? statement.all(...params) : (statement.run(...params), [])) as Row[]);
    },
    exec: (script) => Promise.resolve(void database.exec(script)),
    close: () => Promise.resolve(void database.close()),
  };
}
