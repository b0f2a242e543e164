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
