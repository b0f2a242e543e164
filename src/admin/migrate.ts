import { setTimeout as sleep } from 'node:timers/promises';
import { Migrator, type Kysely, type Migration } from 'kysely';
import type { MigrationContext } from '../../migrations/context.js';
import { baseMigrations, schemaMigrations } from '../../migrations/index.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { GuardError, messageOf } from '../core/errors.js';
import { withMigrationLease, withoutKyselyMigrationLock } from './migration-lease.js';
import { withOwnTablesIntrospection } from './own-tables-introspection.js';
import { assertWritable, readOnlyMigration } from './writable-check.js';
import { appliedSchemaMigrations, readSchemaVersions, type SchemaVersions } from './schema-version.js';

/**
 * How long a migration that keeps losing races with other processes is retried. By time, not by
 * attempts: on SQLite an attempt waits at most the busy timeout, which is acquireTimeout and may be
 * short, and many replicas may queue behind one that builds an index on a large history table.
 */
const MIGRATION_RACE_BUDGET_MS = 60_000;

/** A migration a newer version applied: already done, so never run; listed so that Kysely accepts the ledger. */
const APPLIED_ELSEWHERE: Migration = { up: () => Promise.resolve() };

/**
 * Brings the guard's tables to the latest schema, in two ledgers (migrations/index.ts): 001 and 002
 * in `<prefix>migrations`, exactly as 0.1.0 records them (so that 0.1.0's own `migrate()` still
 * finds only what it knows), then 003 onwards in `<prefix>schema_migrations`. Returns the schema
 * versions after.
 *
 * Safe on many replicas at once, through a transaction pooler and on a multi-primary cluster: one
 * at a time holds the migration lease (a row, migration-lease.ts; Kysely's own session lock is
 * switched off), the others wait and then find the work done. A migration that still lost a race
 * with another process (`dialect.isMigrationRace`: "already exists", a duplicate, a deadlock) is
 * retried; by then it finds the work done.
 *
 * A server that takes no writes (a standby, a read-only server) fails it with `READ_ONLY_DATABASE`,
 * also when the tables are up to date: the guard could take no lock there.
 */
export async function runMigrations(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<SchemaVersions> {
  try {
    return await migrate(db, dialect, tables);
  } catch (error) {
    const cause = error instanceof GuardError && error.code === 'MIGRATION_FAILED' ? error.cause : error;
    throw (await readOnlyMigration(db, dialect, cause)) ?? error;
  }
}

async function migrate(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<SchemaVersions> {
  const started = performance.now();
  // A prefix without a schema means the schema unqualified names resolve to: named, so that the
  // migrator and the migrations look for existing tables there and not in every schema.
  const schema = tables.schema ?? (await currentSchema(db, dialect));
  const context = { tables: { ...tables, schema }, dialect };
  const migrator = (table: string, lockTable: string, migrations: Record<string, Migration>): Migrator =>
    new Migrator({
      // The migrator asks `db.introspection` whether its two tables exist; on PostgreSQL Kysely's
      // answer reads every schema, and another app's DDL at that instant (graphile-worker creating
      // its schema) failed it; on MySQL it reads every table of the database, seconds beside a few
      // hundred, while the other replicas wait on the migrator's lock. It is asked about these two
      // tables only, by a targeted read.
      db: withoutKyselyMigrationLock(withOwnTablesIntrospection(db, dialect, schema, [table, lockTable])),
      provider: { getMigrations: () => Promise.resolve(migrations) },
      migrationTableName: table,
      migrationLockTableName: lockTable,
      ...(schema === undefined ? {} : { migrationTableSchema: schema }),
    });
  try {
    await withMigrationLease(db, dialect, context.tables, () => migrateAll(db, dialect, context, started, migrator));
  } catch (error) {
    throw error instanceof GuardError ? error : migrationFailed(error);
  }
  try {
    return await readSchemaVersions(db, dialect, context.tables);
  } catch (error) {
    throw migrationFailed(error);
  }
}

/** Both ledgers, then the routines: what one migrate() does while it holds the lease. */
async function migrateAll(
  db: Kysely<unknown>,
  dialect: Dialect,
  context: MigrationContext,
  started: number,
  migrator: (table: string, lockTable: string, migrations: Record<string, Migration>) => Migrator,
): Promise<void> {
  const { tables } = context;
  await migrateToLatest(dialect, started, () =>
    Promise.resolve(migrator(tables.migrations, tables.migrationLock, baseMigrations(context))),
  );
  await migrateToLatest(dialect, started, async () => {
    // A newer version's migrations are in the ledger and not in this code: Kysely refuses a ledger
    // naming migrations it was not given, so they are given, as already done. Read before the
    // migrator starts: on SQLite its transaction holds the one connection.
    const applied = await appliedSchemaMigrations(db, dialect, context.tables);
    const known = schemaMigrations(context);
    return migrator(tables.schemaMigrations, tables.schemaMigrationLock, {
      ...Object.fromEntries(applied.map((name) => [name, APPLIED_ELSEWHERE])),
      ...known,
    });
  });
  try {
    // The routines again (migration 006 creates them): where an earlier migrate() lacked the
    // privilege to create them, a later one by a user who has it does. One read when they exist.
    await dialect.createRoutines?.(db, context.tables);
    await assertWritable(db, dialect, context.tables);
  } catch (error) {
    throw migrationFailed(error);
  }
}

async function migrateToLatest(dialect: Dialect, started: number, migrator: () => Promise<Migrator>): Promise<void> {
  let ledgerRaces = 0;
  for (;;) {
    let error: unknown;
    try {
      ({ error } = await (await migrator()).migrateToLatest());
    } catch (readFailed) {
      error = readFailed;
    }
    if (error === undefined) return;
    // "corrupted migrations": a newer replica recorded a migration after the ledger was read; read
    // it again, a few times (more would be a ledger edited by hand, which no retry mends).
    const ledgerRace = error instanceof Error && error.message.startsWith('corrupted migrations') && (ledgerRaces += 1) <= 5;
    if ((ledgerRace || dialect.isMigrationRace(error)) && performance.now() - started < MIGRATION_RACE_BUDGET_MS) {
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
  return new GuardError('MIGRATION_FAILED', `Migrating the cronguard tables failed: ${messageOf(error)}`, {
    cause: error,
  });
}
