import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a MySQL server that can lose one reply: armed with a test on SQL text, it
 * lets the next execution of a matching prepared statement through to the server, waits for the
 * server's answer (the statement has then run and, in autocommit, committed), and instead of
 * passing it on closes the client's connection. What a dropped network link does at the worst moment.
 */
export interface ReplyDropper {
  /** `mysql://…` through the proxy. */
  readonly url: string;
  /** Drops the reply to the next execution of a statement whose SQL passes `matches`. */
  arm(matches: (sql: string) => boolean): void;
  /** How many replies were dropped. */
  readonly dropped: number;
  close(): Promise<void>;
}

const COM_STMT_PREPARE = 0x16;
const COM_STMT_EXECUTE = 0x17;

/** Splits a byte stream into MySQL packets (3-byte length, 1-byte sequence number). */
function packetReader(onPacket: (sequence: number, payload: Buffer) => void): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const length = pending.readUIntLE(0, 3);
      if (pending.length < 4 + length) break;
      onPacket(pending[3] ?? 0, pending.subarray(4, 4 + length));
      pending = pending.subarray(4 + length);
    }
  };
}

/** Options of `startReplyDropper`. */
export interface ReplyDropperOptions {
  /**
   * Keep the server's side of a dropped connection open (what it sends is thrown away) until
   * `close()`: the client has lost its connection, the server has not noticed. MariaDB rolls back a
   * statement waiting for a lock once it finds its client gone; this keeps such a wait waiting.
   */
  readonly keepServerSide?: boolean;
}

export async function startReplyDropper(serverUrl: string, { keepServerSide = false }: ReplyDropperOptions = {}): Promise<ReplyDropper> {
  const target = new URL(serverUrl);
  let matches: ((sql: string) => boolean) | undefined;
  let dropped = 0;
  const sockets = new Set<Socket>();
  const proxy: Server = createServer((client) => {
    const server = connect(Number(target.port), target.hostname);
    sockets.add(client).add(server);
    /** The SQL of each statement prepared on this connection, by id. */
    const prepared = new Map<number, string>();
    let preparing: string | undefined;
    let dropNextReply = false;
    const readClient = packetReader((sequence, payload) => {
      if (sequence !== 0) return;
      if (payload[0] === COM_STMT_PREPARE) preparing = payload.subarray(1).toString('utf8');
      if (payload[0] === COM_STMT_EXECUTE && matches?.(prepared.get(payload.readUInt32LE(1)) ?? '') === true) {
        matches = undefined;
        dropNextReply = true;
      }
    });
    const readServer = packetReader((sequence, payload) => {
      // The first packet of a successful prepare's answer: 0x00, then the statement id.
      if (preparing !== undefined && sequence === 1) {
        if (payload[0] === 0) prepared.set(payload.readUInt32LE(1), preparing);
        preparing = undefined;
      }
    });
    client.on('data', (chunk: Buffer) => {
      readClient(chunk);
      server.write(chunk);
    });
    let serverKept = false;
    server.on('data', (chunk: Buffer) => {
      if (serverKept) return;
      readServer(chunk);
      if (dropNextReply) {
        dropped += 1;
        serverKept = keepServerSide;
        client.destroy();
        if (!serverKept) server.destroy();
        return;
      }
      client.write(chunk);
    });
    const close = (): void => {
      client.destroy();
      sockets.delete(client);
      if (serverKept) return;
      server.destroy();
      sockets.delete(server);
    };
    const serverGone = (): void => {
      serverKept = false;
      close();
    };
    client.on('close', close).on('error', close);
    server.on('close', serverGone).on('error', serverGone);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  if (address === null || typeof address === 'string') throw new Error('no proxy port');
  const url = new URL(serverUrl);
  url.hostname = '127.0.0.1';
  url.port = String(address.port);
  return {
    url: url.toString(),
    arm: (test) => void (matches = test),
    get dropped() {
      return dropped;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        proxy.close(() => resolve());
      }),
  };
}
