import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';

/**
 * Clean stops in the slot ledger (issue 35). `<prefix>declarations`: one row per guard process
 * (`instance_id`, a random token of the process, so that a restart under the same `lockedBy` is
 * a new row) and job it schedules. `started_at` is its first declaration, `declared_at` its last
 * (hourly), `stopped_at` when its shutdown stopped scheduling the job (null while it runs, and
 * for a process that died without one). When the last process declaring a job stopped cleanly,
 * the ledger expects no slot from that stop until a process declares the job again. A new table,
 * so that no statement of an older version changes; `<prefix>jobs` stays one row per job.
 */
export function createDeclarations(context: MigrationContext): Migration {
  const { tables, dialect } = context;
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      let create = schema
        .createTable(tables.declarations)
        // IF NOT EXISTS: a team that first applied migrations/sql by hand can still call migrate().
        .ifNotExists()
        .addColumn('job_name', sql.raw(types.jobName), (column) => column.notNull())
        .addColumn('instance_id', sql.raw(types.token), (column) => column.notNull())
        .addColumn('locked_by', sql.raw(types.lockedBy), (column) => column.notNull())
        .addColumn('started_at', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('declared_at', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('stopped_at', sql.raw(types.timestamp))
        // One job's rows together: the ledger reads them by job_name, the stop by (job_name, instance_id).
        .addPrimaryKeyConstraint(`${tables.declarations}_pkey`, ['job_name', 'instance_id']);
      if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
      await create.execute();
    },
  };
}
