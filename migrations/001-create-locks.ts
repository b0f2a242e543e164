import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';

/**
 * One row per job name. `token` identifies the execution holding the lock (null once released);
 * `locked_by` only tells a human who that is.
 */
export function createLocksTable({ tables, dialect }: MigrationContext): Migration {
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      let create = schema
        .createTable(tables.locks)
        // IF NOT EXISTS: a team that first applied migrations/sql by hand can still call migrate().
        .ifNotExists()
        .addColumn('name', sql.raw(types.jobName), (column) => column.notNull().primaryKey())
        .addColumn('lock_until', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('locked_at', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('locked_by', sql.raw(types.lockedBy), (column) => column.notNull())
        .addColumn('token', sql.raw(types.token));
      if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
      await create.execute();
    },
  };
}
