import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';
import { existingTable } from './existing-table.js';

/**
 * The `spread` option of `guard.schedule` (issue 34). On `<prefix>jobs`: `spread_ms`, the spread
 * window a job's schedule declares (null without one). Each run of a spread job starts a stable
 * offset after its slot, computed from the job's name and this window (src/core/spread.ts): the
 * ledger adds that offset to lateAfter, so that a spread run is not counted late. Nullable, so
 * that the declaring statement of an older version, which does not name it, still works.
 */
export function addSpread(context: MigrationContext): Migration {
  const { tables, dialect } = context;
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      // Checked first: on MySQL an ALTER commits by itself, and the plain SQL file may have been
      // applied by hand; no dialect here has ADD COLUMN IF NOT EXISTS everywhere (MySQL 8.0, SQLite).
      const jobs = await existingTable(db, context, tables.jobs);
      if (jobs?.columns.some((column) => column.name === 'spread_ms') !== true) {
        await schema.alterTable(tables.jobs).addColumn('spread_ms', sql.raw(types.bigint)).execute();
      }
    },
  };
}
