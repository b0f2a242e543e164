import type { Migration } from 'kysely';
import type { MigrationContext } from './context.js';

/**
 * The dialect's stored routines (issue 19). On MySQL/MariaDB, `<prefix>take_locks_v1`: a batch of
 * acquires takes its locks and starts its runs in one call instead of four round trips (see
 * src/dialects/mysql/schema.ts). Nothing on PostgreSQL and SQLite, whose batch already is
 * one statement or needs no round trip. A replica of an older version never calls it; a replica of
 * this version on tables not migrated yet takes its batches as before.
 */
export function createRoutines(context: MigrationContext): Migration {
  const { tables, dialect } = context;
  return {
    async up(db) {
      await dialect.createRoutines?.(db, tables);
    },
  };
}
