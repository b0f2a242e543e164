import { sql, type Kysely, type TableMetadata } from 'kysely';
import type { ColumnTypes, ReadOnlyKind, MigrationLeaseSql, TableNames } from '../../core/dialect.js';
import { tablesOfColumns } from '../common/kysely.js';
import { quotedTable } from '../common/quote.js';

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

interface ColumnRow {
  table_name: string;
  schema_name: string;
  is_view: boolean;
  column_name: string;
  data_type: string;
  data_type_schema: string;
  not_null: boolean;
  has_default: boolean;
  auto_incrementing: boolean;
  comment: string | null;
}

/**
 * The tables among `names` in `schema` (current_schema() when undefined), with their columns, in
 * the shape of Kysely's introspector. Kysely's own (PostgresIntrospector.getTables) reads every
 * table of every schema and, per column, resolves the table by its name
 * (`pg_get_serial_sequence('schema.table', column)`) and the schema by its name
 * (`has_schema_privilege`): a relation another app dropped or renamed after the statement's
 * catalog snapshot was taken is still in its rows, and the name no longer resolves ("relation …
 * does not exist"), so graphile-worker migrating its schema at the same instant failed cronguard's
 * migrate().
 */
export async function postgresFindTables(
  db: Kysely<unknown>,
  schema: string | undefined,
  names: readonly string[],
): Promise<TableMetadata[]> {
  if (names.length === 0) return [];
  // Filtered by schema and table name on the catalogs themselves (both bound), so it reads this
  // guard's rows only, and nothing in it looks up a table or a schema by a name another session
  // may change: each catalog is joined by oid, and a serial or identity column is found by its
  // sequence's dependency on the column (what pg_get_serial_sequence does, from the oid instead of
  // the name). Another session's DDL then only decides whether a row is in this statement's
  // snapshot, and never fails it.
  const { rows } = await sql<ColumnRow>`
    SELECT c.relname AS table_name, n.nspname AS schema_name, c.relkind = 'v' AS is_view,
           a.attname AS column_name, t.typname AS data_type, tn.nspname AS data_type_schema,
           a.attnotnull AS not_null, a.atthasdef AS has_default,
           EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                     JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
                    WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.refobjid = c.oid
                      AND d.refobjsubid = a.attnum AND d.deptype IN ('a', 'i')) AS auto_incrementing,
           col_description(c.oid, a.attnum) AS comment
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
      JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
     WHERE n.nspname = COALESCE(${schema ?? null}::text, current_schema())
       AND c.relname IN (${sql.join([...names])})
       AND c.relkind IN ('r', 'p', 'v')
     ORDER BY c.relname, a.attnum`.execute(db);
  return tablesOfColumns(
    rows.map((row) => ({
      table: { name: row.table_name, schema: row.schema_name, isView: row.is_view },
      column: {
        name: row.column_name,
        dataType: row.data_type,
        dataTypeSchema: row.data_type_schema,
        isNullable: !row.not_null,
        hasDefaultValue: row.has_default,
        isAutoIncrementing: row.auto_incrementing,
        ...(row.comment === null ? {} : { comment: row.comment }),
      },
    })),
  );
}

/**
 * A standby while `pg_is_in_recovery()` is true (it replays a primary's WAL until promoted); else a
 * server whose transactions are read-only (default_transaction_read_only for it, the database or the role).
 */
export async function postgresReadOnlyKind(db: Kysely<unknown>): Promise<ReadOnlyKind> {
  const { rows } = await sql<{ standby: boolean }>`SELECT pg_is_in_recovery() AS standby`.execute(db);
  return rows[0]?.standby === true ? 'standby' : 'server';
}

const table = (tables: TableNames) => sql.raw(quotedTable(tables, 'migrationLease', '"'));

/**
 * The migration lease on PostgreSQL (core/dialect.ts `MigrationLeaseSql`). Times are `now()`, the
 * start of the statement's own transaction: each statement is its own transaction here.
 */
export const postgresMigrationLease: MigrationLeaseSql = {
  // IF NOT EXISTS: several replicas create it at once; two CREATEs racing can still fail with a
  // duplicate pg_type row (23505) or 42P07, which isMigrationRace retries. No seed row: the take
  // inserts it.
  // The schema of a `schema.prefix` first (Kysely's migrator creates it too, but later); racing
  // creators fail on pg_namespace's unique index (23505), retried.
  create: (tables) => [
    ...(tables.schema === undefined ? [] : [sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(tables.schema)}`]),
    sql`CREATE TABLE IF NOT EXISTS ${table(tables)} (
      id integer PRIMARY KEY,
      holder varchar(36),
      expires_at timestamptz(3) NOT NULL
    )`,
  ],
  // One statement decides: the insert when the row is absent, else the update only where nobody
  // holds it or the holder's lease expired. A concurrent inserter waits on the row's unique index and
  // then evaluates the WHERE on the committed row, which is not expired: 0 rows, it lost. rowCount
  // 1 is a win either way.
  take: (tables, token, ttlMs) => sql`INSERT INTO ${table(tables)} AS lease (id, holder, expires_at)
    VALUES (1, ${token}, now() + ${ttlMs}::integer * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
    WHERE lease.holder IS NULL OR lease.expires_at < now()`,
  // By token: a holder whose lease expired and was taken renews nothing (0 rows).
  renew: (tables, token, ttlMs) => sql`UPDATE ${table(tables)}
    SET expires_at = now() + ${ttlMs}::integer * interval '1 millisecond'
    WHERE id = 1 AND holder = ${token}`,
  release: (tables, token) => sql`UPDATE ${table(tables)} SET holder = NULL WHERE id = 1 AND holder = ${token}`,
};
