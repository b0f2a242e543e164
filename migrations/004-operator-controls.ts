import { sql, type Kysely, type Migration, type SchemaModule } from 'kysely';
import type { MigrationContext } from './context.js';
import { existingTable } from './existing-table.js';

/**
 * Operator controls (pause, resume, trigger): the pause and the pending trigger live on the lock
 * row, which every acquire reads anyway, so a paused job costs no extra statement; a manual run
 * says who asked for it; every control change is kept in `<prefix>controls`.
 *
 * Lock row: `paused_at` not null means paused (until `paused_until`, or until resumed when that is
 * null), with `paused_reason` and `paused_by`. `trigger_id` not null is a pending "run now"
 * request (`trigger_by` asked at `trigger_at`; `trigger_force` runs it even while paused), which
 * the one replica whose take clears it runs.
 */
export function operatorControls(context: MigrationContext): Migration {
  const { tables, dialect } = context;
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      // Column by column, each only when absent: on MySQL every ALTER commits by itself, so a
      // migration cut half-way must finish next time, and a team may have applied the SQL files by hand.
      await addMissingColumns(db, schema, context, tables.locks, [
        ['paused_until', types.timestamp],
        ['paused_reason', types.text],
        ['paused_by', types.lockedBy],
        ['paused_at', types.timestamp],
        ['trigger_id', types.token],
        ['trigger_by', types.lockedBy],
        ['trigger_at', types.timestamp],
        ['trigger_force', types.boolean],
      ]);
      await addMissingColumns(db, schema, context, tables.runs, [['triggered_by', types.lockedBy]]);
      if ((await existingTable(db, context, tables.controls)) === undefined) {
        let create = schema
          .createTable(tables.controls)
          .addColumn('id', sql.raw(types.token), (column) => column.notNull().primaryKey())
          .addColumn('job_name', sql.raw(types.jobName), (column) => column.notNull())
          .addColumn('action', sql.raw(types.status), (column) => column.notNull())
          .addColumn('actor', sql.raw(types.lockedBy), (column) => column.notNull())
          .addColumn('reason', sql.raw(types.text))
          .addColumn('pause_until', sql.raw(types.timestamp))
          .addColumn('changed_at', sql.raw(types.timestamp), (column) => column.notNull());
        if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
        await create.execute();
      }
      // "The control changes of one job, newest first" (guard.controls, cronguard audit).
      const index = `${tables.controls}_job_changed`;
      const createIndex = schema.createIndex(index).on(tables.controls).columns(['job_name', 'changed_at', 'id']);
      if (dialect.indexExists === undefined) await createIndex.ifNotExists().execute();
      else if (!(await dialect.indexExists(db, tables.controls, index))) await createIndex.execute();
    },
  };
}

async function addMissingColumns(
  db: Kysely<unknown>,
  schema: SchemaModule,
  context: MigrationContext,
  table: string,
  columns: [name: string, type: string][],
): Promise<void> {
  const found = await existingTable(db, context, table);
  const present = new Set(found?.columns.map((column) => column.name) ?? []);
  for (const [name, type] of columns) {
    if (!present.has(name)) await schema.alterTable(table).addColumn(name, sql.raw(type)).execute();
  }
}
