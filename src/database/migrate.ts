import { setTimeout as sleep } from 'node:timers/promises';
import { Migrator, type Kysely } from 'kysely';
import { cronguardMigrations } from '../../migrations/index.js';
import type { Dialect, TableNames } from '../guard/dialect.js';
import { GuardError } from '../guard/errors.js';

const SQLITE_ATTEMPTS = 20;

/**
 * Brings the guard's tables to the latest schema. Safe on many replicas at once: Kysely's migrator
 * takes a lock (an advisory lock on PostgreSQL, GET_LOCK on MySQL) and tolerates a concurrent
 * creator of its own tables. SQLite has no such lock across processes: a migration racing another
 * process fails with SQLITE_BUSY, a UNIQUE violation when both recorded the same migration, or
 * "already exists" when both created the same table or column, and is retried; by then it finds
 * the work done.
 */
export async function runMigrations(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: () => Promise.resolve(cronguardMigrations({ tables, dialect })) },
    migrationTableName: tables.migrations,
    migrationLockTableName: tables.migrationLock,
    ...(tables.schema === undefined ? {} : { migrationTableSchema: tables.schema }),
  });
  for (let attempt = 1; ; attempt += 1) {
    const { error } = await migrator.migrateToLatest();
    if (error === undefined) return;
    if (dialect.name === 'sqlite' && isSqliteRace(error) && attempt < SQLITE_ATTEMPTS) {
      await sleep(20 + Math.random() * 80);
      continue;
    }
    const detail = error instanceof Error ? error.message : String(error);
    throw new GuardError('MIGRATION_FAILED', `Migrating the cronguard tables failed: ${detail}`, { cause: error });
  }
}

function isSqliteRace(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  if (code.startsWith('SQLITE_BUSY') || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE') return true;
  return code === 'SQLITE_ERROR' && /already exists|duplicate column name/.test((error as Error).message);
}
