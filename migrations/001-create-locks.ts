import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';

/**
 * One row per job name. `token` identifies the execution holding the lock (null once released);
 * `locked_by` only tells a human who that is. `previous_token` is the token of the holder a
 * takeover took the lock from when that one never released (its run is then `abandoned`).
 * `last_slot` is the newest scheduled slot that ran: a slot at or before it does not run again.
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
        .addColumn('token', sql.raw(types.token))
        .addColumn('previous_token', sql.raw(types.token))
        .addColumn('last_slot', sql.raw(types.timestamp));
      if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
      await create.execute();
    },
  };
}
