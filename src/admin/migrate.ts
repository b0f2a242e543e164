import { setTimeout as sleep } from 'node:timers/promises';
import {
  Migrator,
  type Kysely,
  type Migration,
  type MigrationResultSet,
  type DatabaseIntrospector,
  type SchemaMetadata,
  type TableMetadata,
  sql,
} from 'kysely';
import type { MigrationContext } from '../../migrations/context.js';
import { baseMigrations, schemaMigrations } from '../../migrations/index.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { GuardError, messageOf, readOnlyDatabaseError } from '../core/errors.js';
import { withMigrationLease, withoutKyselyMigrationLock } from './migration-lease.js';
import { appliedSchemaMigrations, readSchemaVersions, type SchemaVersions } from './versions.js';
import { quotedTable } from '../dialects/common/quote.js';

/**
 * How long a migration that keeps losing races with other processes is retried. By time, not by
 * attempts: on SQLite an attempt waits at most the busy timeout, which is acquireTimeout and may be
 * short, and many replicas may queue behind one that builds an index on a large history table.
 */
const MIGRATION_RACE_BUDGET_MS = 60_000;

/** What `migrate()` did: the schema versions after it, what it applied, and what it left out. */
export interface MigrationReport extends SchemaVersions {
  /** The migrations this call applied, oldest first (`001_create_locks` …); none when the tables were up to date. */
  readonly applied: string[];
  /**
   * The stored routines left out because the user may not create them (MySQL/MariaDB's take
   * procedure without the CREATE ROUTINE privilege): the replicas then take a batch of locks in
   * four statements instead of one call, and a `migrate()` by a user who has the privilege creates
   * them. None when every routine exists (always none on PostgreSQL and SQLite).
   */
  readonly skippedRoutines: string[];
}

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
 * retried; by then it finds the work done. Reports the migrations this call applied (another
 * process's work, found done, is not listed) and the routines it had to leave out.
 *
 * A server that takes no writes (a standby, a read-only server) fails it with `READ_ONLY_DATABASE`,
 * also when the tables are up to date: the guard could take no lock there.
 */
export async function runMigrations(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<MigrationReport> {
  try {
    return await migrate(db, dialect, tables);
  } catch (error) {
    const cause = error instanceof GuardError && error.code === 'MIGRATION_FAILED' ? error.cause : error;
    throw (await readOnlyMigration(db, dialect, cause)) ?? error;
  }
}

async function migrate(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<MigrationReport> {
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
  let done: MigrationWork;
  try {
    done = await withMigrationLease(db, dialect, context.tables, () => migrateAll(db, dialect, context, started, migrator));
  } catch (error) {
    throw error instanceof GuardError ? error : migrationFailed(error);
  }
  try {
    return { ...(await readSchemaVersions(db, dialect, context.tables)), ...done };
  } catch (error) {
    throw migrationFailed(error);
  }
}

type MigrationWork = Pick<MigrationReport, 'applied' | 'skippedRoutines'>;

/** Both ledgers, then the routines: what one migrate() does while it holds the lease. */
async function migrateAll(
  db: Kysely<unknown>,
  dialect: Dialect,
  context: MigrationContext,
  started: number,
  migrator: (table: string, lockTable: string, migrations: Record<string, Migration>) => Migrator,
): Promise<MigrationWork> {
  const { tables } = context;
  // Kysely's migrator runs a ledger's migrations in one transaction where DDL rolls back: on
  // PostgreSQL and SQLite; MySQL commits each DDL statement on its own (Kysely's own adapters say the
  // same, through getExecutor(), which Kysely marks internal).
  const rollsBack = dialect.name !== 'mysql';
  const base = await migrateToLatest(dialect, started, rollsBack, () =>
    Promise.resolve(migrator(tables.migrations, tables.migrationLock, baseMigrations(context))),
  );
  const schema = await migrateToLatest(dialect, started, rollsBack, async () => {
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
    // What it still could not create is what this call reports left out (006 itself, just
    // applied, met the same refusal).
    const skippedRoutines = (await dialect.createRoutines?.(db, context.tables)) ?? [];
    await assertWritable(db, dialect, context.tables);
    return { applied: [...base, ...schema], skippedRoutines };
  } catch (error) {
    throw migrationFailed(error);
  }
}

/**
 * Runs one ledger's migrations to the latest, retrying races; resolves with the names of the
 * migrations applied. Those of an attempt that failed count too where DDL does not roll back
 * (MySQL: each statement commits, and a retry does not run them again); where it does, only the
 * attempt that succeeded applied anything.
 */
async function migrateToLatest(
  dialect: Dialect,
  started: number,
  rollsBack: boolean,
  migrator: () => Promise<Migrator>,
): Promise<string[]> {
  let ledgerRaces = 0;
  const applied: string[] = [];
  for (;;) {
    let error: unknown;
    let results: MigrationResultSet['results'];
    try {
      ({ error, results } = await (await migrator()).migrateToLatest());
    } catch (readFailed) {
      error = readFailed;
    }
    const succeeded = (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName);
    if (error === undefined) return [...applied, ...succeeded];
    if (!rollsBack) applied.push(...succeeded);
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

type FindTables = NonNullable<Dialect['findTables']>;

/**
 * Kysely's `DatabaseIntrospector` answering about this guard's own tables only (`names`, in
 * `schema`), through the dialect's targeted read, for Kysely's migrator: it asks
 * `introspection.getTables()` whether its ledger and lock tables exist, and checks only the name
 * and the schema of what it gets.
 */
class OwnTablesIntrospector implements DatabaseIntrospector {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly findTables: FindTables,
    private readonly schema: string | undefined,
    private readonly names: readonly string[],
  ) {}

  // The migrator asks whether the ledger's schema exists: one read of pg_namespace, which resolves
  // no other relation's name, so Kysely's own answer is safe.
  getSchemas(): Promise<SchemaMetadata[]> {
    return this.db.introspection.getSchemas();
  }

  getTables(): Promise<TableMetadata[]> {
    return this.findTables(this.db, this.schema, this.names);
  }

  async getMetadata(): Promise<{ tables: TableMetadata[] }> {
    return { tables: await this.getTables() };
  }
}

/**
 * `db` as Kysely's `Migrator` is given it: the same instance, whose `introspection` answers about
 * this guard's own tables (`names` in `schema`) by the dialect's `findTables`, where it has one
 * (PostgreSQL, MySQL; elsewhere `db` itself). Kysely's PostgreSQL introspector reads every schema
 * and fails when another app's DDL runs at the same instant (postgres/schema.ts says how); its
 * MySQL one reads every table of the database, seconds beside a few hundred (mysql/schema.ts).
 *
 * A Proxy, not a subclass or a dialect wrapper: the instance may be the app's own (a `Kysely` it
 * passed as `database`), built with a dialect and a driver the guard cannot reach, and Kysely
 * keeps them in a private field, so no second instance sharing its connections can be built
 * through the public API. The migrator reads `db.introspection` on the instance it is given only;
 * every other member (`schema`, `withPlugin`, `connection()`, `getExecutor()`) is the instance's
 * own, called on the instance itself (its methods read its private fields).
 */
export function withOwnTablesIntrospection(
  db: Kysely<unknown>,
  dialect: Dialect,
  schema: string | undefined,
  names: readonly string[],
): Kysely<unknown> {
  const { findTables } = dialect;
  if (findTables === undefined) return db;
  const introspector = new OwnTablesIntrospector(db, findTables.bind(dialect), schema, names);
  return new Proxy(db, {
    get(target, property) {
      if (property === 'introspection') return introspector;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * The `READ_ONLY_DATABASE` error for a migration the server refused as read-only, else undefined.
 * Asks the server which kind it is, to say so (a failed ask leaves both named).
 */
export async function readOnlyMigration(db: Kysely<unknown>, dialect: Dialect, error: unknown): Promise<GuardError | undefined> {
  if (!dialect.isReadOnly(error)) return undefined;
  const kind = await dialect.readOnlyKind?.(db).catch(() => undefined);
  return readOnlyDatabaseError('Migrating the cronguard tables failed', kind, error);
}

/**
 * Rejects with the driver's read-only error where the server refuses writes to the lock table. On tables
 * that are up to date, a migration writes nothing, so a standby or a read-only server would pass
 * `migrate()` ("tables are up to date") and fail every acquire after: this write fails there.
 * Without a lock table (the first migrate), the migration's CREATE TABLE fails the same way.
 */
export async function assertWritable(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<void> {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  try {
    // Changes no row and takes no row lock (no row matches), but is a write: PostgreSQL rejects
    // it in a read-only transaction (a standby is one), MySQL under read_only for a user without
    // the privilege to bypass it, as it would the acquire.
    await sql`UPDATE ${locks} SET name = name WHERE 1 = 0`.execute(db);
  } catch (error) {
    // Rethrown as it is: runMigrations says READ_ONLY_DATABASE for it (readOnlyMigration).
    if (!dialect.isMissingTable(error)) throw error;
  }
}
