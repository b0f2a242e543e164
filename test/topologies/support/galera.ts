// A 3-node MariaDB Galera cluster on loopback, for the topology tests: Debian's mariadbd with the
// galera-4 provider, each node with its own temp datadir and free ports (SQL, group communication,
// IST, SST). Node 1 bootstraps the cluster, nodes 2 and 3 join it by rsync SST.
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import { accessSync, constants as fsConstants, rmSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import mysql from 'mysql2/promise';
import { findMariadbd, getFreePort } from '../../setup/databases.js';

export const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';
const TEST_DATABASE = 'cronguard_test';
const READY_TIMEOUT_MS = 150_000;
const STOP_GRACE_MS = 10_000;
const LOG_TAIL_LINES = 60;

/** One node of the cluster. */
export interface GaleraNode {
  /** 1, 2 or 3. */
  readonly index: number;
  readonly sqlPort: number;
  /** Connection URL of the `cronguard_test` database on this node. */
  readonly url: string;
  /** The mariadbd process id (while it runs). */
  readonly pid: number | undefined;
  /** Whether the process is still running. */
  readonly running: boolean;
  /** The last lines of the node's output. */
  logTail(): string;
  /** SIGKILL: the node vanishes without leaving the cluster; resolves once the process is gone. */
  kill(): Promise<void>;
}

export interface GaleraCluster {
  readonly nodes: readonly GaleraNode[];
  /** Milliseconds the start took (install, bootstrap, two joins by SST, the test database). */
  readonly startMs: number;
  /** Waits until every running node says wsrep_ready=ON and a cluster of `size` nodes. */
  waitForClusterSize(size: number, timeoutMs?: number): Promise<void>;
  /** Stops every node and deletes the data. Safe to call more than once. */
  stop(): Promise<void>;
}

function findExecutable(names: readonly string[]): string | undefined {
  for (const dir of ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin']) {
    for (const name of names) {
      const file = path.join(dir, name);
      try {
        accessSync(file, fsConstants.X_OK);
        return file;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

function run(file: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 10 * 1024 * 1024 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${path.basename(file)} failed: ${error.message}\n${stdout}\n${stderr}`)) : resolve(),
    );
  });
}

class NodeProcess implements GaleraNode {
  private child: ChildProcessByStdio<null, Readable, Readable> | undefined;
  private exited: Promise<void> = Promise.resolve();
  private exitInfo: string | undefined;
  private readonly lines: string[] = [];

  constructor(
    readonly index: number,
    readonly sqlPort: number,
    private readonly args: readonly string[],
  ) {}

  get url(): string {
    return `mysql://root@127.0.0.1:${this.sqlPort}/${TEST_DATABASE}`;
  }

  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  get running(): boolean {
    return this.child !== undefined && this.exitInfo === undefined;
  }

  start(mariadbd: string, extra: readonly string[]): void {
    const child = spawn(mariadbd, [...this.args, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.exitInfo = undefined;
    const push = (chunk: string): void => {
      if (process.env['CRONGUARD_DEBUG_DB']) process.stderr.write(`[galera ${this.index}] ${chunk}`);
      for (const line of chunk.split('\n')) {
        if (line.trim() === '') continue;
        this.lines.push(line);
        if (this.lines.length > LOG_TAIL_LINES) this.lines.shift();
      }
    };
    // Drain both pipes, or a chatty server blocks once the pipe buffer fills.
    child.stdout.setEncoding('utf8').on('data', push);
    child.stderr.setEncoding('utf8').on('data', push);
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitInfo ??= `code ${String(code)}, signal ${String(signal)}`;
        resolve();
      });
      child.once('error', (error) => {
        this.exitInfo ??= `spawn error: ${error.message}`;
        resolve();
      });
    });
  }

  logTail(): string {
    return this.lines.join('\n');
  }

  describeExit(): string | undefined {
    return this.exitInfo;
  }

  async kill(): Promise<void> {
    if (!this.running) return;
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  async terminate(): Promise<void> {
    if (!this.running) return;
    this.child?.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
  }

  killNow(): void {
    if (this.running) this.child?.kill('SIGKILL');
  }
}

/** wsrep_ready and wsrep_cluster_size of one node; throws while it does not answer. */
async function wsrepStatus(port: number): Promise<{ ready: string; size: number }> {
  const connection = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root', connectTimeout: 2_000 });
  try {
    const [rows] = await connection.query("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_size')");
    const status = new Map((rows as { Variable_name: string; Value: string }[]).map((row) => [row.Variable_name, row.Value]));
    return { ready: status.get('wsrep_ready') ?? 'OFF', size: Number(status.get('wsrep_cluster_size') ?? 0) };
  } finally {
    await connection.end();
  }
}

async function waitForNode(node: NodeProcess, size: number, deadline: number): Promise<void> {
  let last = 'no answer yet';
  for (;;) {
    const exit = node.describeExit();
    if (exit !== undefined) throw new Error(`cronguard: Galera node ${node.index} exited (${exit})\n${node.logTail()}`);
    if (Date.now() > deadline) {
      throw new Error(`cronguard: Galera node ${node.index} not ready in a cluster of ${size} (${last})\n${node.logTail()}`);
    }
    try {
      const status = await wsrepStatus(node.sqlPort);
      if (status.ready === 'ON' && status.size === size) return;
      last = `wsrep_ready=${status.ready}, wsrep_cluster_size=${status.size}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await sleep(200);
  }
}

/**
 * Starts the cluster: 24 s on an idle 2-core machine, 50-131 s at a load average of 18-41 (measured as `startMs`), most of it the
 * two rsync state transfers. `nodeFlags` are added to every node's command line.
 */
export async function startGaleraCluster({ nodeFlags = [] }: { nodeFlags?: readonly string[] } = {}): Promise<GaleraCluster> {
  const started = Date.now();
  const mariadbd = findMariadbd();
  const installDb = findExecutable(['mariadb-install-db', 'mysql_install_db']);
  if (mariadbd === undefined || installDb === undefined) {
    throw new Error('cronguard: mariadbd not found. Install it with: apt-get install -y mariadb-server galera-4 rsync');
  }
  try {
    accessSync(GALERA_PROVIDER, fsConstants.R_OK);
  } catch {
    throw new Error(`cronguard: ${GALERA_PROVIDER} not found. Install it with: apt-get install -y galera-4`);
  }
  if (findExecutable(['rsync']) === undefined) throw new Error('cronguard: rsync not found (Galera SST). apt-get install -y rsync');

  const baseDir = await mkdtemp(path.join(tmpdir(), 'cronguard-galera-'));
  // As root, the nodes run as Debian's `mysql` user: the joiner's rsync daemon (SST) started by root
  // would switch to `nobody`, which cannot write into the datadir. Otherwise as the current user.
  const user = userInfo().uid === 0 ? 'mysql' : userInfo().username;
  const userFlag = `--user=${user}`;
  const ports = await Promise.all(
    [1, 2, 3].map(async () => ({
      sql: await getFreePort(),
      gcomm: await getFreePort(),
      ist: await getFreePort(),
      sst: await getFreePort(),
    })),
  );
  const clusterAddress = `gcomm://${ports.map((port) => `127.0.0.1:${port.gcomm}`).join(',')}`;
  const nodes = ports.map((port, i) => {
    const dir = path.join(baseDir, `node${i + 1}`);
    return new NodeProcess(i + 1, port.sql, [
      '--no-defaults', // must be the first argument: ignore /etc/mysql/*
      `--datadir=${path.join(dir, 'data')}`,
      `--port=${port.sql}`,
      '--bind-address=127.0.0.1',
      `--socket=${path.join(dir, 'mysqld.sock')}`,
      `--pid-file=${path.join(dir, 'mysqld.pid')}`,
      `--tmpdir=${dir}`,
      userFlag,
      '--skip-name-resolve',
      '--skip-log-bin',
      '--innodb-buffer-pool-size=32M',
      '--innodb-log-file-size=16M',
      '--max-connections=300',
      '--innodb-fast-shutdown=2',
      // What Galera requires: row-based replication events, interleaved auto-increment locks.
      '--binlog-format=ROW',
      '--innodb-autoinc-lock-mode=2',
      '--default-storage-engine=InnoDB',
      '--wsrep-on=ON',
      `--wsrep-provider=${GALERA_PROVIDER}`,
      `--wsrep-cluster-address=${clusterAddress}`,
      '--wsrep-cluster-name=cronguard',
      `--wsrep-node-name=node${i + 1}`,
      '--wsrep-node-address=127.0.0.1',
      `--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:${port.gcomm};ist.recv_addr=127.0.0.1:${port.ist};gcache.size=32M`,
      `--wsrep-sst-receive-address=127.0.0.1:${port.sst}`,
      '--wsrep-sst-method=rsync',
      ...nodeFlags,
    ]);
  });

  const onProcessExit = (): void => {
    for (const node of nodes) node.killNow();
    rmSync(baseDir, { recursive: true, force: true });
  };
  process.once('exit', onProcessExit);
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      process.removeListener('exit', onProcessExit);
      // Joiners first, so no node waits for a donor that is gone.
      await Promise.all(nodes.map((node) => node.terminate()));
      await rm(baseDir, { recursive: true, force: true });
    })();
    return stopped;
  };
  const waitForClusterSize = async (size: number, timeoutMs = READY_TIMEOUT_MS): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    await Promise.all(nodes.filter((node) => node.running).map((node) => waitForNode(node, size, deadline)));
  };

  try {
    if (userInfo().uid === 0) await run('/bin/chown', [`${user}:`, baseDir]);
    const firstData = path.join(baseDir, 'node1', 'data');
    await run(installDb, [
      '--no-defaults',
      `--datadir=${firstData}`,
      userFlag,
      // root@localhost/127.0.0.1 with an empty password instead of unix_socket auth.
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      '--skip-name-resolve',
    ]);
    // The joiners start from a copy (mariadbd needs a system schema to start); their state
    // differs from the cluster's, so each gets a full rsync SST from a donor when it joins.
    await cp(firstData, path.join(baseDir, 'node2', 'data'), { recursive: true });
    await cp(firstData, path.join(baseDir, 'node3', 'data'), { recursive: true });
    if (userInfo().uid === 0) await run('/bin/chown', ['-R', `${user}:`, baseDir]);
    const [first, second, third] = nodes as [NodeProcess, NodeProcess, NodeProcess];
    first.start(mariadbd, ['--wsrep-new-cluster']);
    await waitForNode(first, 1, Date.now() + READY_TIMEOUT_MS);
    // One joiner at a time: the donor serves one SST at a time.
    second.start(mariadbd, []);
    await waitForNode(second, 2, Date.now() + READY_TIMEOUT_MS);
    third.start(mariadbd, []);
    await waitForClusterSize(3);
    const connection = await mysql.createConnection({ host: '127.0.0.1', port: first.sqlPort, user: 'root' });
    try {
      await connection.query(`CREATE DATABASE IF NOT EXISTS \`${TEST_DATABASE}\``);
    } finally {
      await connection.end();
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, startMs: Date.now() - started, waitForClusterSize, stop };
}
