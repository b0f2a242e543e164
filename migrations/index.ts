import type { Migration } from 'kysely';
import { createLocksTable } from './001-create-locks.js';
import { createRunsTable } from './002-create-runs.js';
import { createReplicasTable } from './003-create-replicas.js';
import { operatorControls } from './004-operator-controls.js';
import { createSlotLedger } from './005-slot-ledger.js';
import { createRoutines } from './006-take-procedure.js';
import { createDeclarations } from './007-declarations.js';
import { addSpread } from './008-spread.js';
import type { MigrationContext } from './context.js';

export type { MigrationContext } from './context.js';

/**
 * How the schema moves forward (docs/schema.md, docs/upgrading.md):
 *
 * - Forward only, expand then contract: a released migration never changes, and a migration never
 *   drops or renames a table or column that a released version still reads or writes. New columns
 *   are nullable or have a default, so that the statements of older versions, which do not name
 *   them, still work.
 * - Two ledgers. `BASE_MIGRATIONS` (001, 002) are recorded in `<prefix>migrations`, as 0.1.0
 *   recorded them: that list is frozen. 0.1.0's `migrate()` runs Kysely's Migrator on that table
 *   and throws ("corrupted migrations") when it lists a migration its code does not know, so
 *   nothing is ever added to it. Every later migration goes in `SCHEMA_MIGRATIONS`, recorded in
 *   `<prefix>schema_migrations`, whose runner (src/admin/migrate.ts) skips the names it does not
 *   know: a replica of an older version restarting after a newer one migrated still starts.
 * - To add one: a file `NNN-what.ts` here, its entry at the end of `SCHEMA_MIGRATIONS` (the next
 *   number: the schema version is the highest number applied), and `NNN_what.sql` in each of
 *   migrations/sql/{postgres,mysql,sqlite}, ending with its row in `cronguard_schema_migrations`.
 *   Code that needs the new table or column reads `SCHEMA_VERSION` against the database's
 *   (src/admin/schema-version.ts) and says once that `cronguard migrate` is due.
 */
type MigrationFactory = (context: MigrationContext) => Migration;

/** 0.1.0's migrations, in `<prefix>migrations`. Frozen: never add to this list. */
const BASE_MIGRATIONS: Record<string, MigrationFactory> = {
  '001_create_locks': createLocksTable,
  '002_create_runs': createRunsTable,
};

/** Every later migration, in order, in `<prefix>schema_migrations`. Add new ones at the end. */
const SCHEMA_MIGRATIONS: Record<string, MigrationFactory> = {
  '003_create_replicas': createReplicasTable,
  '004_operator_controls': operatorControls,
  '005_slot_ledger': createSlotLedger,
  '006_take_procedure': createRoutines,
  '007_declarations': createDeclarations,
  '008_spread': addSpread,
};

/** The number of a migration's name (`003_create_replicas` → 3). */
export function migrationNumber(name: string): number {
  return Number.parseInt(name, 10);
}

/** The schema version this code writes and reads: the number of its newest migration. */
export const SCHEMA_VERSION = Math.max(...Object.keys({ ...BASE_MIGRATIONS, ...SCHEMA_MIGRATIONS }).map(migrationNumber));

/** The version `<prefix>migrations` alone stands for: a database 0.1.0 created and nothing migrated since. */
export const BASE_SCHEMA_VERSION = Math.max(...Object.keys(BASE_MIGRATIONS).map(migrationNumber));

function build(factories: Record<string, MigrationFactory>, context: MigrationContext): Record<string, Migration> {
  return Object.fromEntries(Object.entries(factories).map(([name, factory]) => [name, factory(context)]));
}

/** 001 and 002, for the Migrator on `<prefix>migrations`. */
export function baseMigrations(context: MigrationContext): Record<string, Migration> {
  return build(BASE_MIGRATIONS, context);
}

/** 003 onwards, for the Migrator on `<prefix>schema_migrations`. */
export function schemaMigrations(context: MigrationContext): Record<string, Migration> {
  return build(SCHEMA_MIGRATIONS, context);
}
