// PgBouncer (Debian's 1.18) in front of PostgreSQL, transaction mode and session mode, both at once:
// OS-process replicas with the guard's default options, concurrent migrate() in separate processes,
// the operator's tools (history, pause/resume/trigger, slots, doctor, the dashboard) and shutdown's
// cancel, all through PgBouncer. Figures go to RELIABILITY.md (topology-report.ts).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it, type ExpectStatic } from 'vitest';
import { createGuard, GuardError, type Guard } from '../../src/index.js';
import { detectTransactionPooling } from '../../src/dialects/postgres/server-facts.js';
import pg from 'pg';
import { recordingLogger } from '../support/guards.js';
import { startWorker, type Worker } from '../support/processes.js';
import { openRaw } from '../support/raw-database.js';
import { describeResult, repoRoot, runProcess } from '../support/run-process.js';
import { hasPgBouncer, PGBOUNCER_BINARY, startPgBouncer, type PoolMode, type RunningPgBouncer } from './support/pgbouncer.js';
import { recordTopologyFigure } from './support/topology-report.js';

const REPLICAS = 3;
const JOBS = 3;
const RUN_MS = 62_000;
/** Slots this close to the start or the end of the run are not counted: the replicas were starting or stopping. */
const EDGE_MS = 2_000;
const MIGRATE_ROUNDS = 5;
const bin = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

type ReplicaMessage =
  | { type: 'ready'; pid: number }
  | { type: 'failed'; error: string }
  | { type: 'ran'; job: string; slot: string | null; pid: number }
  | { type: 'log'; level: 'warn' | 'error'; message: string }
  | { type: 'exiting'; pid: number };
type MigrateMessage = { type: 'ready' } | { type: 'done'; error: string | null };

let counter = 0;
const freshPrefix = (): string => `pgb${process.pid}_${(counter += 1)}_${Math.random().toString(36).slice(2, 7)}_`;

/** PgBouncer's pool per mode: transaction mode small (the server sessions move between clients); session mode must hold every client connection. */
const POOL_SIZE: Record<PoolMode, number> = { transaction: 4, session: 60 };

/** `rounds` rounds of `REPLICAS` processes calling migrate() at the same instant on fresh tables; the errors (null: success). */
async function migrateRounds(url: string, rounds: number): Promise<(string | null)[]> {
  const errors: (string | null)[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const prefix = freshPrefix();
    const workers = Array.from({ length: REPLICAS }, () => startWorker<MigrateMessage>('migrate-worker.ts', [url, prefix]));
    await Promise.all(workers.map((worker) => worker.next('ready')));
    const startAt = Date.now() + 300;
    for (const worker of workers) worker.send({ startAt });
    const reports = await Promise.all(workers.map((worker) => worker.next<Extract<MigrateMessage, { type: 'done' }>>('done')));
    errors.push(...reports.map((report) => report.error));
  }
  return errors;
}

/** Shutdown cuts an acquire waiting on a row lock, through PgBouncer: the cancel request reaches the server session. */
async function shutdownCancelsWaitingAcquire(bouncer: RunningPgBouncer, expect: ExpectStatic): Promise<void> {
  const prefix = freshPrefix();
  // acquireTimeout far beyond the test's wait: only a cancel can end the take on the server in time.
  const guard = createGuard({ database: bouncer.url, tablePrefix: prefix, acquireTimeout: '30s', logger: recordingLogger() });
  await guard.migrate();
  const job = { name: 'waiting-at-shutdown', lockAtMostFor: '1m' };
  expect((await guard.run(job, () => 1)).executed).toBe(true);
  const holder = await openRaw('postgres', bouncer.serverUrl);
  const monitor = await openRaw('postgres', bouncer.serverUrl);
  const waiting = async (): Promise<number> =>
    (
      await monitor.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position(? in query) > 0",
        [`${prefix}locks`],
      )
    )[0]?.n ?? -1;
  try {
    await holder.exec('BEGIN');
    await holder.query(`SELECT * FROM ${prefix}locks FOR UPDATE`);
    let ran = false;
    const run = guard.run(job, () => void (ran = true));
    await expect.poll(waiting, { timeout: 10_000, interval: 100 }).toBe(1);
    await guard.shutdown({ timeout: '1s' });
    // The holder still holds the row: the take no longer waits on the server only if it was cancelled.
    await expect.poll(waiting, { timeout: 5_000, interval: 100 }).toBe(0);
    await holder.exec('COMMIT');
    expect(await run).toMatchObject({ executed: false, reason: 'error', error: { code: 'GUARD_CLOSED' } });
    await sleep(300);
    expect(ran).toBe(false);
    const [row] = await monitor.query<{ token: string | null }>(`SELECT token FROM ${prefix}locks WHERE name = ?`, [job.name]);
    expect(row?.token).toBeNull();
  } finally {
    await holder.close().catch(() => undefined);
    await monitor.close().catch(() => undefined);
  }
}

/** What the replicas ran per (job, slot) in the counted window. */
function countSlots(ran: readonly { job: string; slot: string | null }[], from: number, to: number) {
  const runs = new Map<string, number>();
  for (const { job, slot } of ran) {
    if (slot === null || !job.startsWith('job-')) continue;
    const key = `${job} ${slot}`;
    runs.set(key, (runs.get(key) ?? 0) + 1);
  }
  let expected = 0;
  let once = 0;
  let duplicated = 0;
  let missed = 0;
  const first = Math.ceil(from / 1_000) * 1_000;
  for (let index = 0; index < JOBS; index += 1) {
    for (let slot = first; slot <= to; slot += 1_000) {
      expected += 1;
      const count = runs.get(`job-${index} ${new Date(slot).toISOString()}`) ?? 0;
      if (count === 0) missed += 1;
      else if (count === 1) once += 1;
      else duplicated += 1;
    }
  }
  // A slot outside the window run twice counts too: the promise holds for every slot.
  const duplicatedAnywhere = [...runs.values()].filter((count) => count > 1).length;
  return { expected, once, duplicated, duplicatedAnywhere, missed };
}

async function dashboardPage(guard: Guard): Promise<{ status: number; body: string }> {
  const server = createServer(guard.dashboard());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    return { status: response.status, body: await response.text() };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

async function pgbouncerTopology(poolMode: PoolMode, expect: ExpectStatic): Promise<void> {
  const bouncer = await startPgBouncer({ poolMode, defaultPoolSize: POOL_SIZE[poolMode] });
  const replicas: Worker<ReplicaMessage>[] = [];
  let operator: Guard | undefined;
  try {
    // Detection: transaction pooling seen where it is, and not through session pooling or straight.
    for (const [url, pooled] of [
      [bouncer.url, poolMode === 'transaction'],
      [bouncer.serverUrl, false],
    ] as const) {
      const pool = new pg.Pool({ connectionString: url });
      try {
        expect(await detectTransactionPooling(pool), url).toBe(pooled);
      } finally {
        await pool.end();
      }
    }

    const migrateStarted = performance.now();
    const migrateErrors = await migrateRounds(bouncer.url, MIGRATE_ROUNDS);
    const migrateSeconds = (performance.now() - migrateStarted) / 1_000;
    expect(migrateErrors).toEqual(Array(MIGRATE_ROUNDS * REPLICAS).fill(null));

    // The replicas each migrate at start (together), then run the jobs from the same instant.
    const prefix = freshPrefix();
    for (let index = 0; index < REPLICAS; index += 1) {
      replicas.push(startWorker<ReplicaMessage>('topology-replica.ts', [bouncer.url, prefix, String(JOBS)]));
    }
    const ready = await Promise.all(replicas.map((replica) => Promise.race([replica.next('ready'), replica.next('failed')])));
    expect(ready.map((message) => message.type)).toEqual(Array(REPLICAS).fill('ready'));
    const startedAt = Date.now();
    for (const replica of replicas) replica.send({ type: 'start' });

    // The operator's controls through PgBouncer, while the replicas run.
    operator = createGuard({ database: bouncer.url, tablePrefix: prefix, logger: recordingLogger() });
    const controlled = operator;
    await expect.poll(async () => (await controlled.locks()).some((lock) => lock.name === 'job-0'), { timeout: 20_000 }).toBe(true);
    await operator.pause('manual', { reason: 'topology test' });
    await expect(operator.trigger('manual')).rejects.toSatisfy((error) => error instanceof GuardError && error.code === 'JOB_PAUSED');
    expect(await operator.resume('manual')).toBe(true);
    const manualRuns = (): number =>
      replicas.flatMap((replica) => replica.received).filter((message) => message.type === 'ran' && message.job === 'manual').length;
    const triggered = performance.now();
    await operator.trigger('manual');
    await expect.poll(manualRuns, { timeout: 20_000, interval: 50 }).toBe(1);
    const triggerSeconds = (performance.now() - triggered) / 1_000;

    await sleep(Math.max(0, startedAt + RUN_MS - Date.now()));
    const stoppedAt = Date.now();
    for (const replica of replicas) replica.send({ type: 'stop' });
    await Promise.all(replicas.map((replica) => replica.next('exiting')));
    expect(manualRuns()).toBe(1);

    const received = replicas.flatMap((replica) => replica.received);
    const ran = received.flatMap((message) => (message.type === 'ran' ? [message] : []));
    const logs = received.flatMap((message) => (message.type === 'log' ? [message] : []));
    const counted = countSlots(ran, startedAt + EDGE_MS, stoppedAt - EDGE_MS);
    const seconds = Math.round((stoppedAt - startedAt) / 1_000);
    const errors = logs.filter((log) => log.level === 'error');
    const poolerNotices = logs.filter((log) => log.message.includes('transaction pooler'));

    // History, the slot ledger, doctor and the dashboard, through PgBouncer.
    const history = await operator.history({ job: 'job-0', limit: 1_000 });
    const historySlots = history.runs.map((run) => run.slot?.toISOString());
    const [ledger] = await operator.slots({ job: 'job-0', since: new Date(startedAt), until: new Date(stoppedAt) });
    const doctor = await runProcess(
      process.execPath,
      [bin, 'doctor', '--json', '--database', bouncer.url, '--table-prefix', prefix],
      repoRoot,
    );
    const page = await dashboardPage(operator);
    // doctor --probe through PgBouncer: the transaction pooler seen (a warning: handled), one winner of its race.
    const probe = await operator.probe();

    recordTopologyFigure({
      topology: `PgBouncer 1.18, ${poolMode} mode (default_pool_size ${POOL_SIZE[poolMode]})`,
      scenario: `steady, ${JOBS} every-second jobs, default options`,
      dialect: 'postgres',
      seconds,
      replicas: REPLICAS,
      slotsExpected: counted.expected,
      slotsRanOnce: counted.once,
      duplicated: counted.duplicatedAnywhere,
      missed: counted.missed,
      notes: [
        `${MIGRATE_ROUNDS} rounds of ${REPLICAS} concurrent migrate(): ${migrateErrors.filter((error) => error === null).length}/${migrateErrors.length} succeeded (${migrateSeconds.toFixed(1)} s)`,
        `a trigger ran after ${triggerSeconds.toFixed(1)} s (${poolMode === 'transaction' ? 'polled: no LISTEN behind a transaction pooler' : 'LISTEN'})`,
        `${errors.length} error log lines`,
        ...(poolMode === 'session' && poolerNotices.length > 0
          ? [`${poolerNotices.length} replica(s) polled: the pooling probe timed out`]
          : []),
        "shutdown's cancel cut a waiting acquire",
      ],
    });

    expect(counted.duplicatedAnywhere).toBe(0);
    // Today's failure was 0 slots run: most slots run (a busy 2-core machine may miss a few).
    expect(counted.once).toBeGreaterThan(counted.expected * 0.8);
    expect(
      errors.filter((log) => /prepared statement|not linked|advisory/.test(log.message)),
      'errors of the session features',
    ).toEqual([]);
    // Behind a transaction pooler each replica says once that it polls for triggers. Through session
    // pooling none saw a server process change; the probe's 10 s timeout (a pooler with no free
    // server session) did fire there for 1 of 3 replicas on a 2-core machine running both modes at
    // once: harmless (that replica polls), counted in the figures, not a false claim of pooling.
    if (poolMode === 'transaction') expect(poolerNotices.map((log) => log.message)).toHaveLength(REPLICAS);
    else expect(poolerNotices.filter((log) => !log.message.includes('got no answer within')).map((log) => log.message)).toEqual([]);
    expect(history.runs.length).toBeGreaterThan(0);
    expect(history.runs.every((run) => run.status === 'succeeded')).toBe(true);
    expect(new Set(historySlots).size).toBe(historySlots.length);
    expect(ledger?.job).toBe('job-0');
    expect(ledger?.slots.length).toBeGreaterThan(0);
    expect([0, 1], describeResult('cronguard doctor', doctor)).toContain(doctor.code);
    expect((JSON.parse(doctor.stdout) as { job: string }[]).map((diagnosis) => diagnosis.job)).toContain('job-0');
    expect(page.status).toBe(200);
    expect(page.body).toContain('job-0');
    const probeStatus = (name: string): string | undefined => probe.checks.find((check) => check.check === name)?.status;
    if (poolMode === 'transaction') expect(probeStatus('transaction-pooling'), JSON.stringify(probe.checks)).toBe('warn');
    expect(probeStatus('exclusivity'), JSON.stringify(probe.checks)).toBe('pass');

    await shutdownCancelsWaitingAcquire(bouncer, expect);
  } finally {
    for (const replica of replicas) replica.child.kill('SIGKILL');
    await operator?.close().catch(() => undefined);
    await bouncer.stop();
  }
}

describe('PgBouncer', () => {
  it('is installed (Debian package pgbouncer)', ({ expect }) => {
    expect(hasPgBouncer(), `${PGBOUNCER_BINARY} is missing: apt-get install -y pgbouncer`).toBe(true);
  });

  // Both modes at once: their replicas mostly wait for the next second.
  describe.skipIf(!hasPgBouncer()).concurrent('each mode', () => {
    it.for(['transaction', 'session'] as const)(
      '%s mode: replicas with default options run every slot once, migrate together, and the tools work',
      // 62 s of replicas, 15 migrate() processes, the tools and the cancel: 4-5 min on a loaded
      // 2-core machine (load average 60-90 seen), past the suite's 300 s default.
      { timeout: 600_000 },
      async (mode, { expect }) => {
        await pgbouncerTopology(mode, expect);
      },
    );
  });
});
