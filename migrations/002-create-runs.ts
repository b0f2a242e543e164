import { sql, type Kysely, type Migration, type SchemaModule } from 'kysely';
import type { MigrationContext } from './context.js';
import { existingTable } from './existing-table.js';

/** The run history, one row per guarded execution; `id` is the execution's token. */
export function createRunsTable(context: MigrationContext): Migration {
  const { tables } = context;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      // The table checked, not IF NOT EXISTS (a team may have applied migrations/sql by hand), then
      // each index on its own: on MySQL each DDL statement commits alone, so a migration cut after
      // CREATE TABLE (a killed process, a dropped connection) must still get its indexes next time.
      if ((await existingTable(db, context, tables.runs)) === undefined) await createTable(schema, context);
      // "The newest runs of one job" (history --job, doctor) and "the newest runs" (history, prune).
      await createIndex(db, schema, context, `${tables.runs}_job_started`, ['job_name', 'started_at', 'id']);
      await createIndex(db, schema, context, `${tables.runs}_started`, ['started_at', 'id']);
    },
  };
}

async function createTable(schema: SchemaModule, { tables, dialect }: MigrationContext): Promise<void> {
  const types = dialect.columnTypes;
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
}

/** Creates the index unless it exists (MySQL 8.0 has no CREATE INDEX IF NOT EXISTS: asked first). */
async function createIndex(
  db: Kysely<unknown>,
  schema: SchemaModule,
  { tables, dialect }: MigrationContext,
  index: string,
  columns: string[],
): Promise<void> {
  const create = schema.createIndex(index).on(tables.runs).columns(columns);
  if (dialect.indexExists === undefined) await create.ifNotExists().execute();
  else if (!(await dialect.indexExists(db, tables.runs, index))) await create.execute();
}
