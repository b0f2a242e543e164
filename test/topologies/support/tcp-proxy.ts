// A small TCP proxy on loopback (node:net), standing in for what re-routes clients at a failover:
// DNS, a virtual IP, a re-pointed PgBouncer or a TCP load balancer. The `pg` driver has no
// multi-host URL, so the replicas connect through this and the test re-points it at the promoted
// standby. The standby's replication connection also goes through one, which the test can hold to
// make the standby lag for real: what the held link has not forwarded is lost with the primary.
import { createServer, connect, type Server, type Socket } from 'node:net';

interface Link {
  readonly client: Socket;
  readonly upstream: Socket;
}

export interface TcpProxy {
  readonly port: number;
  /** Where new connections go from now on. Existing ones keep their server until it drops them. */
  pointAt(port: number): void;
  /**
   * Stops forwarding bytes both ways, on open and new connections: the bytes stay in the sockets'
   * buffers, and are lost if the connections are then destroyed. Nothing is closed.
   */
  hold(): void;
  /** Forwards again what was held, and from now on. */
  release(): void;
  /** Destroys every open connection (both sides), dropping anything held. */
  dropConnections(): void;
  /** Connections accepted so far (a reconnecting client opens new ones). */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  let held = false;
  let accepted = 0;
  const links = new Set<Link>();
  const server: Server = createServer((client) => {
    accepted += 1;
    const upstream = connect(target, '127.0.0.1');
    const link = { client, upstream };
    links.add(link);
    const end = (): void => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
    if (held) pause(link);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('tcp proxy: no port');
  const pause = ({ client, upstream }: Link): void => {
    client.unpipe(upstream);
    upstream.unpipe(client);
    client.pause();
    upstream.pause();
  };
  const resume = ({ client, upstream }: Link): void => {
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const dropConnections = (): void => {
    for (const { client, upstream } of [...links]) {
      client.destroy();
      upstream.destroy();
    }
    links.clear();
  };
  return {
    port: address.port,
    get accepted() {
      return accepted;
    },
    pointAt: (port) => {
      target = port;
    },
    hold: () => {
      held = true;
      for (const link of links) pause(link);
    },
    release: () => {
      held = false;
      for (const link of links) resume(link);
    },
    dropConnections,
    close: () => {
      dropConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
