// A PostgreSQL 15 primary and a streaming standby from Debian's binaries, on loopback ports, for the
// failover topology: initdb, pg_basebackup -R, a kill of the primary (its postmaster and every child
// at once, as a lost host), pg_ctl promote. Clients connect through a TCP proxy (`proxy`) that the
// test re-points at the promoted standby; the standby replicates through another (`replicationLink`),
// which `lag()` holds so that the last commits never reach it.
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, appendFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { getFreePort } from '../../setup/databases.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const BIN = process.env['CRONGUARD_PG_BIN'] ?? '/usr/lib/postgresql/15/bin';
const DATABASE = 'cronguard_test';

export interface StandbyPairOptions {
  /** Whether the primary waits for the standby's flush at commit (synchronous_standby_names='*'). */
  readonly synchronous: boolean;
}

export interface PostgresStandbyPair {
  /** The URL the replicas use: through the proxy, at the primary until `pointProxyAtStandby()`. */
  readonly url: string;
  readonly primaryUrl: string;
  readonly standbyUrl: string;
  readonly proxy: TcpProxy;
  /** Kills the primary's postmaster and all its processes with SIGKILL, as a lost host. */
  killPrimary(): void;
  /**
   * Holds the standby's replication connection: from now on nothing the primary commits reaches
   * it. Call `killPrimary()` next; what was held is then lost.
   */
  lag(): void;
  /** Drops the held replication connection (after `killPrimary()`), then promotes the standby and waits until it accepts writes. */
  promoteStandby(): Promise<void>;
  /** Points the proxy at the promoted standby and drops the connections it still holds. */
  pointProxyAtStandby(): void;
  /** Stops every server and proxy, deletes the data. Safe to call more than once. */
  stop(): Promise<void>;
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined)
    throw new Error('cronguard: running as root, but there is no `postgres` OS user to run PostgreSQL');
  return { uid: Number(uid), gid: Number(gid) };
}

function run(file: string, args: readonly string[], user: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(join(BIN, file), args, { ...(user ?? {}), timeout: 120_000 }, (error, stdout, stderr) => {
      if (error === null) resolve();
      else reject(new Error(`${file} ${args.join(' ')} failed: ${error.message}\n${stdout}\n${stderr}`));
    });
  });
}

function chownTree(path: string, user: { uid: number; gid: number } | undefined): void {
  if (user === undefined) return;
  chownSync(path, user.uid, user.gid);
}

function postmasterPid(dataDir: string): number | undefined {
  const file = join(dataDir, 'postmaster.pid');
  if (!existsSync(file)) return undefined;
  const pid = Number.parseInt(readFileSync(file, 'utf8').split('\n')[0] ?? '', 10);
  return Number.isInteger(pid) ? pid : undefined;
}

/** The children of a process, from /proc (a postmaster's backends, walsender, checkpointer…). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid …": comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // The process ended while we read.
    }
  }
  return children;
}

/** SIGKILLs a postmaster and every child at once (a child left behind would keep serving its client). */
function killServer(dataDir: string): void {
  const pid = postmasterPid(dataDir);
  if (pid === undefined) return;
  try {
    // Stopped first, so that it forks no backend between the read of its children and the kill.
    process.kill(pid, 'SIGSTOP');
  } catch {
    return;
  }
  const victims = [pid, ...childrenOf(pid)];
  for (const victim of victims) {
    try {
      process.kill(victim, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  rmSync(join(dataDir, 'postmaster.pid'), { force: true });
}

async function query<T>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end();
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    await sleep(100);
  }
  throw new Error(`cronguard: timed out waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`);
}

export async function startPostgresStandbyPair({ synchronous }: StandbyPairOptions): Promise<PostgresStandbyPair> {
  const user = postgresUser();
  const root = mkdtempSync(join(tmpdir(), 'cronguard-standby-'));
  chownTree(root, user);
  const primaryDir = join(root, 'primary');
  const standbyDir = join(root, 'standby');
  const [primaryPort, standbyPort] = [await getFreePort(), await getFreePort()];
  const opened: TcpProxy[] = [];
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    killServer(primaryDir);
    killServer(standbyDir);
    await Promise.all(opened.map((proxy) => proxy.close()));
    rmSync(root, { recursive: true, force: true });
  };
  const logTail = (): string =>
    ['primary', 'standby']
      .map((name) => join(root, `${name}.log`))
      .filter((file) => existsSync(file))
      .map((file) => `--- ${file}\n${readFileSync(file, 'utf8').split('\n').slice(-30).join('\n')}`)
      .join('\n');
  try {
    await run('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], user);
    appendFileSync(
      join(primaryDir, 'postgresql.conf'),
      [
        `port = ${primaryPort}`,
        "listen_addresses = '127.0.0.1'",
        `unix_socket_directories = '${root}'`,
        'wal_level = replica',
        'max_wal_senders = 5',
        'hot_standby = on',
        'fsync = off',
        'synchronous_commit = on',
        '',
      ].join('\n'),
    );
    // initdb --auth=trust allows replication connections from 127.0.0.1 (the standby's, through the link).
    await run('pg_ctl', ['-D', primaryDir, '-l', join(root, 'primary.log'), '-w', 'start'], user);
    const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/${DATABASE}`;
    await query(`postgres://postgres@127.0.0.1:${primaryPort}/postgres`, `create database ${DATABASE}`);
    const link = await startTcpProxy(primaryPort);
    opened.push(link);
    await run(
      'pg_basebackup',
      ['-h', '127.0.0.1', '-p', String(link.port), '-U', 'postgres', '-D', standbyDir, '-R', '-X', 'stream', '--checkpoint=fast'],
      user,
    );
    appendFileSync(
      join(standbyDir, 'postgresql.conf'),
      // The standby copied the primary's settings; once promoted it must not wait for a standby of its own.
      [`port = ${standbyPort}`, "synchronous_standby_names = ''", 'wal_receiver_status_interval = 1s', ''].join('\n'),
    );
    await run('pg_ctl', ['-D', standbyDir, '-l', join(root, 'standby.log'), '-w', 'start'], user);
    const standbyUrl = `postgres://postgres@127.0.0.1:${standbyPort}/${DATABASE}`;
    await waitFor('the standby to stream', async () => {
      const rows = await query<{ state: string; sync_state: string }>(primaryUrl, 'select state, sync_state from pg_stat_replication');
      return rows.some((row) => row.state === 'streaming');
    });
    if (synchronous) {
      // Sync from now on (not before the standby streams: `create database` would wait for it):
      // a commit returns once the standby has flushed it. Async: at once.
      await query(primaryUrl, "alter system set synchronous_standby_names = '*'");
      await query(primaryUrl, 'select pg_reload_conf()');
      await waitFor('the standby to be synchronous', async () => {
        const rows = await query<{ sync_state: string }>(primaryUrl, 'select sync_state from pg_stat_replication');
        return rows.some((row) => row.sync_state === 'sync');
      });
    }
    const proxy = await startTcpProxy(primaryPort);
    opened.push(proxy);
    return {
      url: `postgres://postgres@127.0.0.1:${proxy.port}/${DATABASE}`,
      primaryUrl,
      standbyUrl,
      proxy,
      killPrimary: () => killServer(primaryDir),
      lag: () => link.hold(),
      async promoteStandby() {
        link.dropConnections();
        await link.close();
        await run('pg_ctl', ['-D', standbyDir, '-w', 'promote'], user);
        await waitFor('the promoted standby to accept writes', async () => {
          const [row] = await query<{ recovery: boolean }>(standbyUrl, 'select pg_is_in_recovery() as recovery');
          return row?.recovery === false;
        });
      },
      pointProxyAtStandby() {
        proxy.pointAt(standbyPort);
        proxy.dropConnections();
      },
      stop,
    };
  } catch (error) {
    const tail = logTail();
    await stop();
    throw new Error(`cronguard: starting a PostgreSQL primary and standby failed: ${String(error)}\n${tail}`, { cause: error });
  }
}
