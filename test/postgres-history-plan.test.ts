// PostgreSQL with 1,000,000 history rows: `history --job X --limit 50` reads the index, not the table.
// How long that takes is a figure of the machine, measured by the benchmark (figure 10), not asserted here.
import { Kysely, PostgresDialect, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { dialectTargets, uniquePrefix } from './support/dialects.js';
import { openRaw } from './support/raw-database.js';

const postgres = dialectTargets().find((target) => target.name === 'postgres');
if (postgres?.serverUrl === undefined || postgres.serverUrl === null) throw new Error('no postgres server');
const url = postgres.serverUrl;

describe('history on postgres at 1,000,000 rows', () => {
  it('reads the (job_name, started_at, id) index backwards, with no table scan and no sort', async () => {
    const prefix = uniquePrefix();
    const queries: CompiledQuery[] = [];
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => void (event.level === 'query' && queries.push(event.query)),
    });
    const guard = createGuard({ database: db, tablePrefix: prefix });
    const raw = await openRaw('postgres', url);
    try {
      await guard.migrate();
      // The million rows go in with the table's indexes and keys dropped, and each is then made
      // again from its own definition as the migration made it (pg_indexes, pg_constraint): one
      // sorted build each instead of a million insertions into each, about half the time.
      const table = `${prefix}runs`;
      const keys = await raw.query<{ conname: string; definition: string }>(
        `SELECT conname, pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conrelid = ?::regclass AND contype IN ('p', 'u')`,
        [table],
      );
      const indexes = await raw.query<{ indexname: string; indexdef: string }>(
        `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ? AND indexname NOT IN
           (SELECT conname FROM pg_constraint WHERE conrelid = ?::regclass)`,
        [table, table],
      );
      expect(indexes.map((index) => index.indexname)).toContain(`${prefix}runs_job_started`);
      for (const { indexname } of indexes) await raw.exec(`DROP INDEX ${indexname}`);
      for (const { conname } of keys) await raw.exec(`ALTER TABLE ${table} DROP CONSTRAINT ${conname}`);
      await raw.exec(`INSERT INTO ${prefix}runs
          (id, job_name, status, locked_by, started_at, finished_at, duration_ms, lock_at_most_for_ms, lock_until, overran)
        SELECT md5(i::text), 'job-' || (i % 100), 'succeeded', 'bulk', now() - i * interval '1 second',
               now() - i * interval '1 second' + interval '10 milliseconds', 10, 60000, now(), false
          FROM generate_series(1, 1000000) AS i`);
      for (const { conname, definition } of keys) await raw.exec(`ALTER TABLE ${table} ADD CONSTRAINT ${conname} ${definition}`);
      for (const { indexdef } of indexes) await raw.exec(indexdef);
      await raw.exec(`ANALYZE ${prefix}runs`);
      queries.length = 0;
      const page = await guard.history({ job: 'job-7', limit: 50 });

      expect(page.runs).toHaveLength(50);
      expect(page.runs.every((run) => run.job === 'job-7')).toBe(true);
      // The read of the runs table (history() may first read the schema version).
      const query = queries.find((each) => each.sql.includes(`${prefix}runs`));
      if (query === undefined) throw new Error('the history query was not captured');
      const plan = await raw.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${query.sql.replace(/\$(\d+)/g, '?')}`, [...query.parameters]);
      const text = plan.map((row) => row['QUERY PLAN']).join('\n');
      expect(text).toMatch(new RegExp(`Index Scan Backward using ${prefix}runs_job_started`));
      expect(text).not.toMatch(/Seq Scan|Sort/);
    } finally {
      await guard.close();
      await db.destroy();
      await raw.exec(`DROP TABLE ${prefix}runs`);
      await raw.close();
    }
  }, 120_000);
});
