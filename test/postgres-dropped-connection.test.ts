// A connection the guard has checked out of its pool dies under it: the server is killed, a
// failover, a network reset. pg then emits 'error' on that client, and a checked-out client has no
// listener of pg-pool's: unheard, the event crashed the whole process (seen in the database-restart
// fault scenario). Each case parks a statement of the guard's on a lock held here, resets its
// connection in a TCP proxy (no goodbye from the server, as when it is killed), and expects the call
// to fail as a call and the process to live on. A worker process, so that a crash is its exit code.
import { createServer, connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { RawDatabase } from './support/raw-database.js';
import { openRaw } from './support/raw-database.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { startWorker } from './support/processes.js';

type Answer = { type: 'read' | 'run'; answer: string };
type Message = { type: 'ready' } | Answer | { type: 'closed' };

const postgres = dialectTargets().find((target) => target.name === 'postgres');
if (postgres === undefined) throw new Error('no postgres target');

/** A TCP proxy in front of the server whose connections can all be reset at once. */
async function startProxy(serverUrl: string): Promise<{ url: string; resetAll: () => void; close: () => Promise<void> }> {
  const target = new URL(serverUrl);
  const clients = new Set<Socket>();
  const proxy = createServer((client) => {
    const server = connect(Number(target.port), target.hostname);
    clients.add(client);
    client.pipe(server).pipe(client);
    const close = (): void => {
      clients.delete(client);
      client.destroy();
      server.destroy();
    };
    client.on('error', close).on('close', close);
    server.on('error', close).on('close', close);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  const url = new URL(serverUrl);
  url.port = String(address.port);
  return {
    url: url.toString(),
    resetAll: () => {
      for (const client of clients) client.resetAndDestroy();
    },
    close: () => new Promise<void>((resolve) => proxy.close(() => resolve())),
  };
}

/**
 * Waits until a statement of the guard's on this test's tables waits on a lock: the statement parked
 * behind this test's lock (other files' guards share the server, and may wait on locks of theirs).
 */
async function waitForWaitingStatement(admin: RawDatabase, prefix: string): Promise<void> {
  await expect
    .poll(
      async () =>
        (
          await admin.query(
            `SELECT pid FROM pg_stat_activity WHERE application_name = 'cronguard' AND wait_event_type = 'Lock' AND strpos(query, ?) > 0`,
            [prefix],
          )
        ).length,
      { timeout: 20_000 },
    )
    .toBeGreaterThan(0);
}

describe('a PostgreSQL connection cut while the guard has it checked out', () => {
  it.skipIf(postgres.serverUrl === null)('fails the call, not the process: a read and an acquire', async () => {
    const { guard, url, prefix } = await migratedGuard(postgres);
    // The lock row exists and is free: the worker's take will find it free and wait on its row lock.
    await guard.run({ name: 'held', lockAtMostFor: '1s' }, () => undefined);
    await guard.close();
    const proxy = await startProxy(url);
    const worker = startWorker<Message>('dropped-connection-worker.ts', [proxy.url, prefix]);
    const holder = await openRaw('postgres', url);
    const admin = await openRaw('postgres', url);
    try {
      await worker.next('ready');

      // Kysely's checkout: history() waits behind a table lock.
      await holder.exec(`BEGIN; LOCK TABLE "${prefix}runs" IN ACCESS EXCLUSIVE MODE`);
      worker.send('read');
      await waitForWaitingStatement(admin, prefix);
      proxy.resetAll();
      await holder.exec('ROLLBACK');
      const read = await worker.next<Answer>('read');
      expect(read.answer).toMatch(/^rejected: /);

      // The guard's own checkout (a cancellable take): the take waits behind the lock row's row lock.
      await holder.exec(`BEGIN; SELECT * FROM "${prefix}locks" WHERE name = 'held' FOR UPDATE`);
      worker.send('run:held');
      await waitForWaitingStatement(admin, prefix);
      proxy.resetAll();
      await holder.exec('ROLLBACK');
      const run = await worker.next<Answer>('run');
      expect(run.answer).toBe('skipped: error');

      // Still alive, and the pool recovers. Another job: the cut take may have committed on the
      // server after its client was gone (its lock then expires after lockAtMostFor, as documented).
      worker.send('run:other');
      expect((await worker.next<Answer>('run')).answer).toBe('executed');
      worker.send('close');
      await worker.next('closed');
      expect(await worker.exited).toBe(0);
    } finally {
      worker.child.kill('SIGKILL');
      await holder.close();
      await admin.close();
      await proxy.close();
    }
  });
});
