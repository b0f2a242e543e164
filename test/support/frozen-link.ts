import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a database server whose link can freeze: while frozen, no byte passes in
 * either direction (a statement sent is held, its answer too), as when the network between an app
 * and its database stops answering without closing. The server itself keeps working, so a server-side
 * bound (PostgreSQL's lock_timeout) cannot answer an acquire before the client's own acquireTimeout.
 */
export interface FrozenLink {
  /** The database URL, through the proxy. */
  readonly url: string;
  freeze(): void;
  /** Lets the held bytes through, and everything after them. */
  thaw(): void;
  close(): Promise<void>;
}

export async function frozenLink(databaseUrl: string): Promise<FrozenLink> {
  const target = new URL(databaseUrl);
  const sockets: Socket[] = [];
  let frozen = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.push(socket);
      socket.on('error', () => socket.destroy());
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    // A connection opened while frozen is frozen too (a dead network lets no handshake through).
    // Paused after the pipes: pipe() resumes a paused source, which let a new connection's
    // statements through and answered an acquire that had to hang.
    if (frozen) for (const socket of [client, upstream]) socket.pause();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the frozen link has no port');
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(address.port);
  return {
    url: url.toString(),
    freeze() {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    thaw() {
      frozen = false;
      for (const socket of sockets) socket.resume();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
