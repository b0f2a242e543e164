import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import type { ClusterFacts, ServerFacts } from '../../core/server-facts.js';
import { detectTransactionPooling } from './transaction-pooling.js';

// One round trip for what every server answers to any role. `now() <> statement_timestamp()`: now()
// is the start of the transaction, so it differs from this statement's start only when the
// statement runs inside a longer transaction (which would also hide the guard's lock rows).
const SERVER_SQL = `SELECT current_setting('server_version') AS version,
  pg_is_in_recovery() AS in_recovery,
  current_setting('transaction_read_only') AS read_only,
  current_setting('default_transaction_isolation') AS isolation,
  now() <> statement_timestamp() AS inside_transaction`;

// The standbys a primary streams to. Roles without pg_read_all_stats see the rows with their
// states hidden (NULL): then whether they are synchronous is unknown.
const STANDBYS_SQL = `SELECT count(*)::int AS standbys,
  count(*) FILTER (WHERE sync_state IN ('sync', 'quorum'))::int AS synchronous,
  count(sync_state)::int AS visible,
  coalesce(string_agg(coalesce(application_name, '?') || ' ' || coalesce(sync_state, '?'), ', '), '') AS detail
  FROM pg_stat_replication`;

interface ServerRow {
  version: string;
  in_recovery: boolean;
  read_only: string;
  isolation: string;
  inside_transaction: boolean;
}

export async function inspectPostgresServer(db: Kysely<unknown>, pool: pg.Pool | undefined): Promise<ServerFacts> {
  const [server] = (await db.executeQuery<ServerRow>(CompiledQuery.raw(SERVER_SQL))).rows;
  if (server === undefined) throw new Error('PostgreSQL answered no row to the server read');
  const readOnly = server.in_recovery
    ? 'a standby in recovery (pg_is_in_recovery() is true)'
    : server.read_only === 'on'
      ? 'transactions are read-only (transaction_read_only = on)'
      : undefined;
  return {
    version: `PostgreSQL ${server.version}`,
    settings: { default_transaction_isolation: server.isolation },
    readOnly,
    insideTransaction: server.inside_transaction,
    // Needs two connections of the driver's pool; a Kysely instance passed in has none to give.
    transactionPooling: pool === undefined ? undefined : await detectTransactionPooling(pool),
    cluster: server.in_recovery ? undefined : await standbys(db),
  };
}

async function standbys(db: Kysely<unknown>): Promise<ClusterFacts | undefined> {
  const [row] = (
    await db.executeQuery<{ standbys: number; synchronous: number; visible: number; detail: string }>(CompiledQuery.raw(STANDBYS_SQL))
  ).rows;
  if (row === undefined || row.standbys === 0) return undefined;
  return {
    kind: 'streaming-standbys',
    members: row.standbys,
    ready: true,
    synchronous: row.visible < row.standbys ? undefined : row.synchronous === row.standbys,
    detail: row.detail,
  };
}
