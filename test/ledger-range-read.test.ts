// The ledger's range read keeps the newest rows of a busy range: with more rows than its bound (a
// `* * * * * *` job whose replicas record their skips), it read the oldest (ORDER BY slot LIMIT),
// and the newest slots, which had run, showed as missed.
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createScheduleStore } from '../src/admin/job-schedules.js';
import { MAX_LEDGER_SLOTS } from '../src/core/slot-ledger.js';
import type { Dialect } from '../src/core/dialect.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import { sqliteDialect } from '../src/dialects/sqlite/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { openRaw } from './support/raw-database.js';

const DIALECTS: Record<string, Dialect<never>> = {
  mysql: mysqlDialect as Dialect<never>,
  postgres: postgresDialect as Dialect<never>,
  sqlite: sqliteDialect as Dialect<never>,
};
/** Rows per slot: one run, and the skips of 20 replicas. 21 × 10,000 slots is more than the read's bound of 200,000. */
const ROWS_PER_SLOT = 21;

/** An INSERT … SELECT of ROWS_PER_SLOT rows for each second before `last` (inclusive), MAX_LEDGER_SLOTS seconds. */
function fillSql(dialect: string, runs: string, last: Date): string {
  const iso = last.toISOString();
  const slot =
    dialect === 'postgres'
      ? `TIMESTAMPTZ '${iso}' - make_interval(secs => n.i)`
      : dialect === 'mysql'
        ? `TIMESTAMP '${iso.slice(0, 23).replace('T', ' ')}' - INTERVAL n.i SECOND`
        : `strftime('%Y-%m-%dT%H:%M:%fZ', '${iso}', '-' || n.i || ' seconds')`;
  const id = dialect === 'mysql' ? `CONCAT('r', n.i, '-', k.j)` : `'r' || n.i || '-' || k.j`;
  return `INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, finished_at, lock_until)
    WITH RECURSIVE d(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM d WHERE x < 9),
      n(i) AS (SELECT a.x * 1000 + b.x * 100 + c.x * 10 + e.x FROM d a CROSS JOIN d b CROSS JOIN d c CROSS JOIN d e),
      k(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM k WHERE j < ${ROWS_PER_SLOT - 1})
    SELECT ${id}, 'busy', ${slot}, CASE WHEN k.j = 0 THEN 'succeeded' ELSE 'skipped' END, 'replica', ${slot}, ${slot}, ${slot}
      FROM n CROSS JOIN k WHERE n.i < ${MAX_LEDGER_SLOTS}`;
}

describe.each(dialectTargets())('the ledger’s range read on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('keeps the newest rows of a range holding more than its bound: every slot that ran shows as run', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const dialect = DIALECTS[target.name] as Dialect<never>;
      const tables = resolveTableNames(prefix, dialect);
      const db = loggedKysely(target, url, []);
      const raw = await openRaw(target.name, url);
      try {
        const store = createScheduleStore(db, dialect, tables);
        await store.declare(
          [{ name: 'busy', expression: '* * * * * *', timezone: 'UTC', lockAtMostForMs: 1_000, lockAtLeastForMs: 0, catchUpMs: null }],
          'replica',
        );
        // Declared two days ago, as of its expression: its slots are expected over the whole range.
        const declared = new Date(Date.now() - 2 * 86_400_000);
        await sql`UPDATE ${sql.table(tables.jobs)} SET changed_at = ${dialect.reads.timeParameter(declared)}`.execute(db);
        const last = new Date(Math.floor(Date.now() / 1_000) * 1_000 - 2_000);
        await raw.exec(fillSql(target.name, dialect.quote + tables.runs + dialect.quote, last));
        const [ledger] = await guard.slots({ job: 'busy' });
        const ran = ledger?.slots.filter((entry) => entry.slot <= last) ?? [];
        // The newest slots whose rows the bounded read took whole: more than 9,000 of the 10,000.
        expect(ran.length).toBeGreaterThan(9_000);
        expect(ledger?.truncated).toBe(true);
        expect(ran.filter((entry) => entry.outcome !== 'succeeded').map((entry) => `${entry.slot.toISOString()} ${entry.outcome}`)).toEqual(
          [],
        );
      } finally {
        await raw.close();
        await db.destroy();
      }
    }, 120_000);
  });
});
