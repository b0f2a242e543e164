import { setTimeout as sleep } from 'node:timers/promises';
import { Migrator, type Kysely } from 'kysely';
import { cronguardMigrations } from '../../migrations/index.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { GuardError, messageOf } from '../core/errors.js';

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
  const started = performance.now();
  // A prefix without a schema means the schema unqualified names resolve to: named, so that the
  // migrator and the migrations look for existing tables there and not in every schema.
  const schema = tables.schema ?? (await currentSchema(db, dialect));
  const inSchema = { ...tables, schema };
  const migrator = new Migrator({
    db,
    provider: { getMigrations: () => Promise.resolve(cronguardMigrations({ tables: inSchema, dialect })) },
    migrationTableName: tables.migrations,
    migrationLockTableName: tables.migrationLock,
    ...(schema === undefined ? {} : { migrationTableSchema: schema }),
  });
  for (;;) {
    const { error } = await migrator.migrateToLatest();
    if (error === undefined) return;
    if (dialect.isMigrationRace(error) && performance.now() - started < MIGRATION_RACE_BUDGET_MS) {
      await sleep(20 + Math.random() * 80);
      continue;
    }
    throw migrationFailed(error);
  }
}

async function currentSchema(db: Kysely<unknown>, dialect: Dialect): Promise<string | undefined> {
  try {
    return await dialect.currentSchema?.(db);
  } catch (error) {
    throw migrationFailed(error);
  }
}

function migrationFailed(error: unknown): GuardError {
  return new GuardError('MIGRATION_FAILED', `Migrating the cronguard tables failed: ${messageOf(error)}`, { cause: error });
}
