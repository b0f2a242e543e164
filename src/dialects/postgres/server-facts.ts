import type pg from 'pg';
import { CompiledQuery, type Kysely } from 'kysely';
import type { ClusterFacts, ServerFacts } from '../../core/dialect.js';

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

/**
 * How long the probe waits for its statements: a pooler whose server sessions are all taken makes
 * the second client wait for ever. Long enough for a busy machine opening two connections.
 */
const PROBE_TIMEOUT_MS = 10_000;

/** What the probe saw: pooled or not, and why, in words for a log line. */
export interface TransactionPoolingProbe {
  readonly pooled: boolean;
  readonly reason: string;
}

/** The part of a node-postgres pool client the probe uses. */
interface ProbeClient {
  query(text: string): Promise<{ rows: { pid: number }[] }>;
  release(destroy?: boolean): void;
}

/**
 * Whether `pool`'s connections go through a transaction pooler (PgBouncer in transaction or
 * statement mode, a managed platform's pooler): a client's statements then run on whichever server
 * session is free, so what lives in a session (LISTEN, a session advisory lock, `SET`, a named
 * prepared statement below PgBouncer 1.21) does not last from one statement to the next.
 *
 * Two clients checked out of the pool at once each run `pg_backend_pid()` in autocommit
 * statements, interleaved in both orders (a, b, a, b, b, a; three times): straight to PostgreSQL, or through
 * session pooling, each client keeps its own server session, so each keeps its pid and the two
 * differ. Through a transaction pooler a client's pid changes, or the two share one (PgBouncer
 * hands the session just released to the next statement). A second client that gets no answer
 * within 10 s waits for a server session the pooler does not have free: pooling too.
 *
 * With a pool of one connection (`max: 1`) the probe has one client, whose pid must not change.
 */
export async function detectTransactionPooling(pool: pg.Pool): Promise<boolean> {
  return (await probeTransactionPooling(pool)).pooled;
}

/** `detectTransactionPooling`, saying why. */
export async function probeTransactionPooling(pool: pg.Pool): Promise<TransactionPoolingProbe> {
  const clients: ProbeClient[] = [];
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), PROBE_TIMEOUT_MS);
    timer.unref();
  });
  let settled = false;
  const checkOut = async (): Promise<void> => {
    const client = (await pool.connect()) as unknown as ProbeClient;
    // Checked out after the timeout: nobody else will hand it back.
    if (settled) client.release(true);
    else clients.push(client);
  };
  const probe = async (): Promise<TransactionPoolingProbe> => {
    await checkOut();
    if ((pool.options.max ?? 10) >= 2) await checkOut();
    if (settled) return { pooled: true, reason: 'timeout' };
    const [a, b = a] = clients as [ProbeClient, ProbeClient?];
    const pid = async (client: ProbeClient): Promise<number> => {
      const row = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0];
      if (row === undefined) throw new Error('pg_backend_pid() returned no row');
      return row.pid;
    };
    // Three times: through a transaction pooler, the guard's other statements (and other replicas')
    // can take the session a client just released between two of its statements, so that each of
    // the two happened to land on a server process of its own six times in a row (1 replica in 3
    // in a PgBouncer test on a loaded machine). Eighteen round trips, once, at start-up.
    const order = [a, b, a, b, b, a, a, b, a, b, b, a, a, b, a, b, b, a];
    const seen: { client: ProbeClient; pid: number }[] = [];
    for (const client of order) seen.push({ client, pid: await pid(client) });
    const pidsOf = (client: ProbeClient): Set<number> => new Set(seen.filter((s) => s.client === client).map((s) => s.pid));
    const ofA = pidsOf(a);
    const ofB = pidsOf(b);
    const moved = { pooled: true, reason: "a connection's server process (pg_backend_pid()) changed between two statements" };
    if (ofA.size !== 1 || ofB.size !== 1) return moved;
    if (b !== a && [...ofA].some((pid) => ofB.has(pid))) {
      return { pooled: true, reason: 'two connections held at once ran their statements in one server process' };
    }
    return { pooled: false, reason: 'each connection kept its own server process' };
  };
  let outcome: TransactionPoolingProbe | 'timeout' | undefined;
  const probing = probe();
  // Past the timeout its statements fail on the destroyed clients: nobody waits for that.
  probing.catch(() => undefined);
  try {
    outcome = await Promise.race([probing, timedOut]);
    return outcome !== 'timeout'
      ? outcome
      : {
          pooled: true,
          reason: `a second connection got no answer within ${PROBE_TIMEOUT_MS / 1_000} s while the first was held (every server session of the pooler is taken)`,
        };
  } finally {
    settled = true;
    clearTimeout(timer);
    // A client still waiting on the pooler is destroyed, not handed back mid-statement.
    for (const client of clients) client.release(outcome === 'timeout');
  }
}
