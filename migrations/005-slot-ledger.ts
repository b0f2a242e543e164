import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';
import { existingTable } from './existing-table.js';

/**
 * The slot ledger (issue 16). `<prefix>jobs`: one row per scheduled job, its schedule as the
 * replicas declare it (upserted when a job is scheduled, refreshed hourly), so that the ledger
 * knows which slots a job should have had. `declared_at` is the last declaration (a schedule no
 * replica declares for a day is retired); `changed_at` is when the expression or time zone last
 * changed (slots are expected from then on only). On `<prefix>runs`: `missed_slots`, how many
 * slots no replica ran between the previous run and this one (written by the winner of the slot
 * after the gap), and `catch_up`, a run of a missed slot made by the `catchUp` option.
 */
export function createSlotLedger(context: MigrationContext): Migration {
  const { tables, dialect } = context;
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      let create = schema
        .createTable(tables.jobs)
        // IF NOT EXISTS: a team that first applied migrations/sql by hand can still call migrate().
        .ifNotExists()
        .addColumn('name', sql.raw(types.jobName), (column) => column.notNull().primaryKey())
        .addColumn('cron_expression', sql.raw(types.lockedBy), (column) => column.notNull())
        .addColumn('time_zone', sql.raw(types.lockedBy))
        .addColumn('lock_at_most_for_ms', sql.raw(types.bigint), (column) => column.notNull())
        .addColumn('lock_at_least_for_ms', sql.raw(types.bigint), (column) => column.notNull())
        .addColumn('catch_up_ms', sql.raw(types.bigint))
        .addColumn('declared_by', sql.raw(types.lockedBy), (column) => column.notNull())
        .addColumn('declared_at', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('changed_at', sql.raw(types.timestamp), (column) => column.notNull());
      if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
      await create.execute();
      // Each column checked first: on MySQL every ALTER commits by itself, so a migration cut
      // between the two (or after the plain SQL file was applied by hand) is finished next time.
      const runs = await existingTable(db, context, tables.runs);
      const has = (column: string): boolean => runs?.columns.some((existing) => existing.name === column) ?? false;
      if (!has('missed_slots')) await schema.alterTable(tables.runs).addColumn('missed_slots', sql.raw(types.bigint)).execute();
      if (!has('catch_up')) {
        await schema
          .alterTable(tables.runs)
          .addColumn('catch_up', sql.raw(types.boolean), (column) => column.notNull().defaultTo(sql.raw('false')))
          .execute();
      }
      // The ledger reads one job's runs by slot range, and live detection the newest slot before
      // one: both by (job_name, slot). MySQL 8.0 has no CREATE INDEX IF NOT EXISTS: asked first.
      const index = `${tables.runs}_job_slot`;
      const createIndex = schema.createIndex(index).on(tables.runs).columns(['job_name', 'slot']);
      if (dialect.indexExists === undefined) await createIndex.ifNotExists().execute();
      else if (!(await dialect.indexExists(db, tables.runs, index))) await createIndex.execute();
    },
  };
}
