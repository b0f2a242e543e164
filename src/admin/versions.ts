import { sql, type Kysely } from 'kysely';
import { BASE_SCHEMA_VERSION, migrationNumber, SCHEMA_VERSION } from '../../migrations/index.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { quotedTable } from '../dialects/common/quote.js';
import { readFileSync } from 'node:fs';

/** The schema version of the database's tables beside the one this code needs. */
export interface SchemaVersions {
  /**
   * The highest migration applied: 0 with no tables, 2 for tables 0.1.0 made (or
   * migrations/sql 001 and 002 applied by hand), then the highest in `<prefix>schema_migrations`.
   */
  readonly database: number;
  /** The version this code's migrations reach; `cronguard migrate` brings `database` up to it. */
  readonly code: number;
}

/** The names recorded in `<prefix>schema_migrations`; none when the table does not exist yet. */
export async function appliedSchemaMigrations(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<string[]> {
  const ledger = sql.raw(quotedTable(tables, 'schemaMigrations', dialect.quote));
  try {
    const { rows } = await sql<{ name: string }>`SELECT name FROM ${ledger}`.execute(db);
    return rows.map((row) => row.name);
  } catch (error) {
    if (dialect.isMissingTable(error)) return [];
    throw error;
  }
}

/**
 * Reads the database's schema version. Without `<prefix>schema_migrations`, the run table tells
 * 0.1.0's schema (2) from no tables (0): teams that applied migrations/sql 001 and 002 by hand have
 * no `<prefix>migrations` ledger, but they have the tables.
 */
export async function readSchemaVersions(db: Kysely<unknown>, dialect: Dialect, tables: TableNames): Promise<SchemaVersions> {
  const applied = await appliedSchemaMigrations(db, dialect, tables);
  if (applied.length > 0) return { database: Math.max(...applied.map(migrationNumber)), code: SCHEMA_VERSION };
  const runs = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  try {
    // Reads no row: only whether the table is there.
    await sql`SELECT 1 FROM ${runs} WHERE 1 = 0`.execute(db);
    return { database: BASE_SCHEMA_VERSION, code: SCHEMA_VERSION };
  } catch (error) {
    if (dialect.isMissingTable(error)) return { database: 0, code: SCHEMA_VERSION };
    throw error;
  }
}

/** The schema version that brings the operator controls' columns and table (migration 004). */
const OPERATOR_CONTROLS_SCHEMA_VERSION = migrationNumber('004_operator_controls');

/** Whether tables at `versions` have the operator controls (the pause columns, the trigger table): migration 004 or later. */
export function hasOperatorControls(versions: SchemaVersions): boolean {
  return versions.database >= OPERATOR_CONTROLS_SCHEMA_VERSION;
}

/** The schema version that brings the declared schedules' table `<prefix>jobs` (migration 005). */
const SLOT_LEDGER_SCHEMA_VERSION = migrationNumber('005_slot_ledger');

/** Whether tables at `versions` have the declared schedules (`<prefix>jobs`): migration 005 or later. */
export function hasSlotLedger(versions: SchemaVersions): boolean {
  return versions.database >= SLOT_LEDGER_SCHEMA_VERSION;
}

/**
 * The version in cronguard's package.json, read when asked (the CLI's `--version`, the version a
 * guard records for its replica): this module runs from dist/src/core/ when installed and from
 * src/core/ in this repository, so the file is looked for in the folders above it, the nearest one
 * named cronguard.
 */
export function packageVersion(): string {
  let folder = new URL('.', import.meta.url);
  for (let depth = 0; depth < 5; depth += 1) {
    try {
      const manifest = JSON.parse(readFileSync(new URL('package.json', folder), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === 'cronguard' && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // No package.json here (or not ours): look one folder up.
    }
    folder = new URL('..', folder);
  }
  throw new Error("cronguard's package.json was not found above the folder of src/core/package-version");
}

/** `packageVersion()`, or 'unknown' where no package.json sits above the code (an app bundled into one file). */
export function packageVersionOrUnknown(): string {
  try {
    return packageVersion();
  } catch {
    return 'unknown';
  }
}
