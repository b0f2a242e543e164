import { setTimeout as sleep } from 'node:timers/promises';
import { Migrator, type Kysely } from 'kysely';
import { cronguardMigrations } from '../../migrations/index.js';
import type { Dialect, TableNames } from '../guard/dialect.js';
import { GuardError } from '../guard/errors.js';

/**
 * How long a migration that keeps losing races with other processes is retried. By time, not by
 * attempts: on SQLite an attempt waits at most the busy timeout, which is acquireTimeout and may be
 * short, and many replicas may queue behind one that builds an index on a large history table.
 */
const MIGRATION_RACE_BUDGET_MS = 60_000;

/**
 * Brings the guard's tables to the latest schema. Safe on many replicas at once: Kysely's migrator
 * takes a lock (an advisory lock on PostgreSQL, GET_LOCK on MySQL) and tolerates a concurrent
 * creator of its own tables. Where the dialect has no such lock (SQLite), a migration that lost a
 * race with another process (`dialect.isMigrationRace`) is retried; by then it finds the work done.
 */
export async function runMigrations(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: () => Promise.resolve(cronguardMigrations({ tables, dialect })) },
    migrationTableName: tables.migrations,
    migrationLockTableName: tables.migrationLock,
    ...(tables.schema === undefined ? {} : { migrationTableSchema: tables.schema }),
  });
  const started = performance.now();
  for (;;) {
    const { error } = await migrator.migrateToLatest();
    if (error === undefined) return;
    if (dialect.isMigrationRace(error) && performance.now() - started < MIGRATION_RACE_BUDGET_MS) {
      await sleep(20 + Math.random() * 80);
      continue;
    }
    const detail = error instanceof Error ? error.message : String(error);
    throw new GuardError('MIGRATION_FAILED', `Migrating the cronguard tables failed: ${detail}`, { cause: error });
  }
}
