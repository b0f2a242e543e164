import { sql } from 'kysely';
import type { MigrationLeaseSql, TableNames } from '../../core/dialect.js';
import { quotedTable } from '../common/quote.js';

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
