// Temporary: proves the global setup starts real servers.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';

describe('test database setup', () => {
  it('provides a working PostgreSQL with minimal WAL and no background writes', async () => {
    const url = inject('postgresUrl');
    expect(url).toEqual(expect.any(String));
    const client = new pg.Client({ connectionString: url ?? undefined });
    await client.connect();
    try {
      const one = await client.query<{ one: number }>('SELECT 1 AS one');
      expect(one.rows[0]?.one).toBe(1);
      const walLevel = await client.query<{ wal_level: string }>('SHOW wal_level');
      expect(walLevel.rows[0]?.wal_level).toBe('minimal');
      const autovacuum = await client.query<{ autovacuum: string }>('SHOW autovacuum');
      expect(autovacuum.rows[0]?.autovacuum).toBe('off');

      // Insert position, not pg_current_wal_lsn(): the latter is the write position and lags behind.
      const lsn = async (): Promise<string | undefined> =>
        (await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]?.lsn;
      const checkpointTimeout = await client.query<{ checkpoint_timeout: string }>('SHOW checkpoint_timeout');
      expect(checkpointTimeout.rows[0]?.checkpoint_timeout).toBe('1d');
      const before = await lsn();
      for (let i = 0; i < 100; i++) await client.query('SELECT 1');
      expect(await lsn()).toBe(before);
    } finally {
      await client.end();
    }
  });

  it.skipIf(inject('mysqlUrl') === null)('provides a working MariaDB', async () => {
    const url = inject('mysqlUrl');
    if (url === null) return;
    const connection = await mysql.createConnection(url);
    try {
      const [rows] = await connection.query<mysql.RowDataPacket[]>('SELECT 1 AS one, DATABASE() AS db');
      expect(rows[0]).toMatchObject({ one: 1, db: 'cronguard_test' });
    } finally {
      await connection.end();
    }
  });
});
