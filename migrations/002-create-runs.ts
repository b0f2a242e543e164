import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';

/** The run history, one row per guarded execution; `id` is the execution's token. */
export function createRunsTable({ tables, dialect }: MigrationContext): Migration {
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      // Checked, not IF NOT EXISTS: MySQL 8.0 has no CREATE INDEX IF NOT EXISTS, and a team may
      // have applied migrations/sql by hand before calling migrate().
      const existing = await db.introspection.getTables();
      if (existing.some((table) => table.name === tables.runs && (tables.schema === undefined || table.schema === tables.schema))) {
        return;
      }
      let create = schema
        .createTable(tables.runs)
        .addColumn('id', sql.raw(types.token), (column) => column.notNull().primaryKey())
        .addColumn('job_name', sql.raw(types.jobName), (column) => column.notNull())
        .addColumn('slot', sql.raw(types.timestamp))
        .addColumn('status', sql.raw(types.status), (column) => column.notNull())
        .addColumn('locked_by', sql.raw(types.lockedBy), (column) => column.notNull())
        .addColumn('started_at', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('finished_at', sql.raw(types.timestamp))
        .addColumn('duration_ms', sql.raw(types.bigint))
        .addColumn('lock_at_most_for_ms', sql.raw(types.bigint))
        .addColumn('lock_until', sql.raw(types.timestamp))
        .addColumn('overran', sql.raw(types.boolean), (column) => column.notNull().defaultTo(sql.raw('false')))
        .addColumn('error', sql.raw(types.text));
      if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
      await create.execute();
      // "The newest runs of one job" (history --job, doctor) and "the newest runs" (history, prune).
      await schema.createIndex(`${tables.runs}_job_started`).on(tables.runs).columns(['job_name', 'started_at', 'id']).execute();
      await schema.createIndex(`${tables.runs}_started`).on(tables.runs).columns(['started_at', 'id']).execute();
    },
  };
}
