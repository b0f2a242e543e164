import { sql, type Migration } from 'kysely';
import type { MigrationContext } from './context.js';

/**
 * One row per replica (its `lockedBy`): the cronguard version it runs, when it started, and when it
 * last said so. A guard writes its row on its first run and about once an hour after; `locks`,
 * `doctor` and `versions` read it beside `locked_by`. A new table, so that no statement of an older
 * version (which never reads it) changes; a holder without a row runs a version before 0.2.0.
 */
export function createReplicasTable({ tables, dialect }: MigrationContext): Migration {
  const types = dialect.columnTypes;
  return {
    async up(db) {
      const schema = tables.schema === undefined ? db.schema : db.schema.withSchema(tables.schema);
      let create = schema
        .createTable(tables.replicas)
        // IF NOT EXISTS: a team that first applied migrations/sql by hand can still call migrate().
        .ifNotExists()
        .addColumn('locked_by', sql.raw(types.lockedBy), (column) => column.notNull().primaryKey())
        .addColumn('version', sql.raw(types.lockedBy), (column) => column.notNull())
        .addColumn('started_at', sql.raw(types.timestamp), (column) => column.notNull())
        .addColumn('seen_at', sql.raw(types.timestamp), (column) => column.notNull());
      if (dialect.createTableSuffix !== '') create = create.modifyEnd(sql.raw(dialect.createTableSuffix));
      await create.execute();
    },
  };
}
