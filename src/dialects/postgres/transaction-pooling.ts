import type pg from 'pg';

/** How long the probe waits for its statements: a pooler with one server session makes the second client wait for ever. */
const PROBE_TIMEOUT_MS = 5_000;

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
 * statements, interleaved in both orders (a, b, a, b, b, a): straight to PostgreSQL, or through
 * session pooling, each client keeps its own server session, so each keeps its pid and the two
 * differ. Through a transaction pooler a client's pid changes, or the two share one (PgBouncer
 * hands the session just released to the next statement). A second client that gets no answer
 * within 5 s waits for the only server session the pooler has: pooling too.
 *
 * With a pool of one connection (`max: 1`) the probe has one client, whose pid must not change.
 */
export async function detectTransactionPooling(pool: pg.Pool): Promise<boolean> {
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
  const probe = async (): Promise<boolean> => {
    await checkOut();
    if ((pool.options.max ?? 10) >= 2) await checkOut();
    if (settled) return true;
    const [a, b = a] = clients as [ProbeClient, ProbeClient?];
    const pid = async (client: ProbeClient): Promise<number> => {
      const row = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0];
      if (row === undefined) throw new Error('pg_backend_pid() returned no row');
      return row.pid;
    };
    const order = [a, b, a, b, b, a];
    const seen: { client: ProbeClient; pid: number }[] = [];
    for (const client of order) seen.push({ client, pid: await pid(client) });
    const pidsOf = (client: ProbeClient): Set<number> => new Set(seen.filter((s) => s.client === client).map((s) => s.pid));
    const ofA = pidsOf(a);
    if (ofA.size !== 1) return true;
    if (b === a) return false;
    const ofB = pidsOf(b);
    return ofB.size !== 1 || [...ofA].some((pid) => ofB.has(pid));
  };
  let outcome: boolean | 'timeout' | undefined;
  const probing = probe();
  // Past the timeout its statements fail on the destroyed clients: nobody waits for that.
  probing.catch(() => undefined);
  try {
    outcome = await Promise.race([probing, timedOut]);
    return outcome === 'timeout' ? true : outcome;
  } finally {
    settled = true;
    clearTimeout(timer);
    // A client still waiting on the pooler is destroyed, not handed back mid-statement.
    for (const client of clients) client.release(outcome === 'timeout');
  }
}
