// migrate() on MySQL/MariaDB reads information_schema about its own tables only. Kysely's
// introspector, which its migrator and the migrations asked whether a table exists, read every
// column of every table in the database; MariaDB opens each table's definition for that, so beside
// the few hundred tables of a shared database one read took about a second, the migrator made
// several per migrate(), and 8 replicas migrating at once (waiting for each other on the
// migrator's lock) took over a minute in CI. Checked by the server's own plan of each read, not by
// time: EXPLAIN says how many databases a read of information_schema scans ("Scanned 0 databases":
// it opened the named tables only).
import { Kysely, MysqlDialect, type LogEvent } from 'kysely';
import { createPool } from 'mysql2';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { openRaw } from './support/raw-database.js';

const mysqlTarget = dialectTargets().find((target) => target.name === 'mysql');

describe.skipIf(mysqlTarget?.serverUrl === null || mysqlTarget === undefined)('MySQL: migrate() reads of information_schema', () => {
  it('name the tables they read, so that the server opens those only, on a fresh and on a migrated prefix', async () => {
    if (mysqlTarget === undefined) return;
    const url = databaseUrl(mysqlTarget);
    const reads: { sql: string; parameters: readonly unknown[] }[] = [];
    const log = (event: LogEvent): void => {
      if (/information_schema\.(columns|tables)/i.test(event.query.sql))
        reads.push({ sql: event.query.sql, parameters: event.query.parameters });
    };
    const pool = createPool({ uri: url, connectionLimit: 2 });
    const db = new Kysely<unknown>({ dialect: new MysqlDialect({ pool }), log });
    const raw = await openRaw('mysql', url);
    try {
      const prefix = uniquePrefix();
      // Twice: the first creates every table (the migrations ask whether each exists first), the
      // second finds the ledgers up to date.
      for (let round = 0; round < 2; round += 1) {
        const guard = createGuard({ database: db, tablePrefix: prefix });
        await guard.migrate();
        await guard.close();
      }
      expect(reads.length).toBeGreaterThan(0);
      const plans: { sql: string; extra: string }[] = [];
      for (const read of reads) {
        const rows = await raw.query<{ table: string; Extra: string | null }>(`EXPLAIN ${read.sql}`, [...read.parameters]);
        for (const row of rows) plans.push({ sql: read.sql, extra: row.Extra ?? '' });
      }
      const scans = plans.filter((plan) => /Scanned (?!0 )\S+ databases?/.test(plan.extra));
      expect(scans).toEqual([]);
      expect(plans.some((plan) => plan.extra.includes('Scanned 0 databases'))).toBe(true);
    } finally {
      await raw.close();
      await db.destroy();
    }
  }, 60_000);
});
