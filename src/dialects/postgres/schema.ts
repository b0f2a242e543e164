import { sql, type Kysely } from 'kysely';
import type { ColumnTypes } from '../../core/dialect.js';

/** timestamptz stores UTC instants: no session time zone can shift a lock's expiry. */
export const postgresColumnTypes: ColumnTypes = {
  jobName: 'varchar(255)',
  timestamp: 'timestamptz(3)',
  lockedBy: 'varchar(255)',
  token: 'varchar(36)',
  status: 'varchar(16)',
  bigint: 'bigint',
  boolean: 'boolean',
  text: 'text',
};

/**
 * The schema unqualified names are created in. Migrations look for their tables there only:
 * Kysely's introspection lists every schema, and a `cronguard_runs` of another schema (another
 * environment's `schema.cronguard_` prefix) must not count as this guard's.
 */
export async function postgresCurrentSchema(db: Kysely<unknown>): Promise<string | undefined> {
  const { rows } = await sql<{ schema: string | null }>`SELECT current_schema() AS schema`.execute(db);
  return rows[0]?.schema ?? undefined;
}

/** lock_not_available: lock_timeout passed (a user may set one on the pool's sessions). */
export function isPostgresLockWaitTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '55P03';
}

/** undefined_table */
export function isPostgresMissingTable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '42P01';
}

/**
 * serialization_failure: under repeatable read or serializable (a server or role default), a
 * statement that met a row another transaction changed since its snapshot, or a serializable
 * conflict. The statement rolled back.
 */
export function isPostgresSerializationFailure(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '40001';
}
