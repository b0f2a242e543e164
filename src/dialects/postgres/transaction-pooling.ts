import type pg from 'pg';
import { loadDriver } from '../common/load-driver.js';

/** How long the second client may wait for a server session before that wait itself says "pooled". */
const SECOND_SESSION_WAIT_MS = 2_000;

/**
 * Whether the pool's connections go through a pooler that hands each transaction a different
 * server session (PgBouncer in transaction or statement mode). Two clients checked out at once
 * read their server process (`pg_backend_pid()`) in autocommit statements, released in both
 * orders (a pooler may reuse its sessions last-in-first-out or in turn): on a direct connection,
 * or through a session-mode pooler, each client keeps its pid and the two differ; through
 * transaction pooling a client's pid changes, or two clients share one. A second client that
 * cannot get a session while the first holds one is pooling too (a pool of one server session).
 */
export async function detectTransactionPooling(pool: pg.Pool): Promise<boolean> {
  // Two connections of their own, with the pool's settings: the pool's may all be busy, or one.
  const { Client } = loadDriver('pg', 'a postgres:// database') as typeof pg;
  const connect = async (): Promise<pg.Client> => {
    const client = new Client(pool.options);
    // A server that drops this connection must not crash the process through an unheard 'error'.
    client.on('error', () => undefined);
    await client.connect();
    return client;
  };
  const first = await connect();
  try {
    const second = await connect();
    try {
      const pid = async (client: pg.Client): Promise<number | 'waited'> => {
        let timer: NodeJS.Timeout | undefined;
        const waited = new Promise<'waited'>((resolve) => {
          timer = setTimeout(() => resolve('waited'), SECOND_SESSION_WAIT_MS);
        });
        try {
          // One autocommit statement: a transaction pooler gives it any free server session.
          const read = client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid').then((result) => result.rows[0]?.pid ?? -1);
          return await Promise.race([read, waited]);
        } finally {
          clearTimeout(timer);
        }
      };
      const readings: Array<[number | 'waited', number | 'waited']> = [];
      for (const order of [
        [first, second],
        [second, first],
        [first, second],
      ] as const) {
        const a = await pid(order[0]);
        const b = await pid(order[1]);
        readings.push(order[0] === first ? [a, b] : [b, a]);
      }
      if (readings.some(([a, b]) => a === 'waited' || b === 'waited' || a === b)) return true;
      const [firstPids, secondPids] = [new Set(readings.map(([a]) => a)), new Set(readings.map(([, b]) => b))];
      return firstPids.size > 1 || secondPids.size > 1;
    } finally {
      await second.end().catch(() => undefined);
    }
  } finally {
    await first.end().catch(() => undefined);
  }
}
