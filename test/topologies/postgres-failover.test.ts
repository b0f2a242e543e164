// PostgreSQL primary + streaming standby, the primary killed mid-run, the standby promoted and the
// replicas' proxy re-pointed at it (the `pg` driver has no multi-host URL: DNS, a virtual IP or a
// re-pointed PgBouncer does this in production). Three replica processes × three every-second jobs,
// 65 s, the primary killed about 20 s in while a 6 s run is in flight. Synchronous: nothing
// committed is lost, so no slot runs twice and no run overlaps. Asynchronous with the standby held
// 3 s behind: the commits of those seconds are lost (lock rows, slot watermarks, history rows),
// the in-flight run's lock row among them: the window this measures and docs/topologies.md states.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { withGuardOn } from '../support/guards.js';
import { uniquePrefix } from '../support/dialects.js';
import { startWorker, type Worker } from '../support/processes.js';
import { measureFailover, type FailoverReplicaMessage, type HistoryRow } from './support/failover-measure.js';
import { startPostgresStandbyPair } from './support/postgres-standby.js';
import { recordTopologyFigure } from './support/topology-report.js';

const REPLICAS = 3;
const RUN_MS = 65_000;
const KILL_AT_MS = 20_000;
const LAG_MS = 3_000;
const SHORT_JOBS = ['short-a', 'short-b'];

async function historyOf(url: string, prefix: string): Promise<HistoryRow[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // The table name is the test's own prefix, never a user value.
    return (await client.query<HistoryRow>(`select job_name, slot, locked_by, status from ${prefix}runs`)).rows;
  } finally {
    await client.end();
  }
}

/** Resolves with the time of the first `type` ('started', or 'ran' by its end) of `job` after `after` (the replicas' messages, polled). */
async function next(
  replicas: readonly Worker<FailoverReplicaMessage>[],
  type: 'started' | 'ran',
  job: string,
  after: number,
): Promise<number> {
  for (;;) {
    const times = replicas
      .flatMap((replica) => replica.received)
      .flatMap((m) => (m.type === type && m.job === job ? [m.type === 'ran' ? m.end : m.start] : []))
      .filter((time) => time > after);
    if (times.length > 0) return Math.min(...times);
    await sleep(20);
  }
}

/** What the guard logged from the kill on, in a few words for the report (the full lines go to stderr). */
function loggedSummary(messages: readonly FailoverReplicaMessage[], killedAt: number): string {
  const logs = messages.flatMap((m) => (m.type === 'log' && m.at >= killedAt ? [m] : []));
  const count = (pattern: RegExp): number => logs.filter((log) => pattern.test(log.message)).length;
  const kinds = [
    ['acquire failed (once per job)', count(/^Taking the lock of job .* failed, so the run was skipped/)],
    ['acquire timed out', count(/^Taking the lock of job .* took over/)],
    ['lock taken again', count(/can take its lock again/)],
    ['pool error', count(/pool error/)],
    ['LISTEN/poll', count(/"run now" requests/)],
    ['release late', count(/^Releasing the lock/)],
    ['slots missed', count(/missed \d+ slot/)],
    ['"overran its lock"', count(/overran its lock/)],
    ['"outlived its lock"', count(/outlived its lock/)],
    ['read-only', count(/read-only/)],
  ] as const;
  const errors = logs.filter((log) => log.level === 'error').length;
  return `${errors} errors, ${logs.length - errors} warnings: ${kinds.flatMap(([kind, n]) => (n > 0 ? [`${kind} ${n}`] : [])).join(', ')}`;
}

async function failover(synchronous: boolean): Promise<void> {
  const pair = await startPostgresStandbyPair({ synchronous });
  const replicas: Worker<FailoverReplicaMessage>[] = [];
  try {
    const prefix = uniquePrefix();
    await withGuardOn(pair.url, prefix, (guard) => guard.migrate());
    for (let i = 0; i < REPLICAS; i += 1) replicas.push(startWorker<FailoverReplicaMessage>('failover-replica.ts', [pair.url, prefix]));
    await Promise.all(replicas.map((replica) => replica.next('ready')));
    const startedAt = Date.now();
    for (const replica of replicas) replica.send({ type: 'start' });

    // The scenario's own timeline: about 20 s in, with a run of 'long' in flight. Async: the standby
    // is held from just after a run of 'long' released (its job ended 200 ms before) and before the
    // next one's take, so that take's lock row is among the commits the kill loses.
    await sleep(KILL_AT_MS - LAG_MS - 7_000);
    await sleep((await next(replicas, 'ran', 'long', Date.now())) + 200 - Date.now());
    const lagFrom = Date.now();
    if (!synchronous) pair.lag();
    const longStarted = await next(replicas, 'started', 'long', lagFrom - 200);
    await sleep(Math.max(lagFrom + LAG_MS, longStarted + 1_000) - Date.now());
    pair.killPrimary();
    const killedAt = Date.now();
    await pair.promoteStandby();
    pair.pointProxyAtStandby();
    const repointedAt = Date.now();

    await sleep(Math.max(0, startedAt + RUN_MS - Date.now()));
    const stoppedAt = Date.now();
    for (const replica of replicas) replica.send({ type: 'stop' });
    const exits = await Promise.all(replicas.map((replica) => replica.exited));
    expect(exits).toEqual(replicas.map(() => 0));

    const messages = replicas.flatMap((replica) => replica.received);
    const history = await historyOf(pair.standbyUrl, prefix);
    const figures = measureFailover(messages, history, {
      from: startedAt + 2_000,
      to: stoppedAt - 2_000,
      killedAt,
      shortJobs: SHORT_JOBS,
    });
    const resumed = Object.entries(figures.resumedAfterMs).map(
      ([job, ms]) => `${job} ${ms === undefined ? 'never' : `${(ms / 1_000).toFixed(1)} s`}`,
    );
    const lostRuns = messages.filter((m) => m.type === 'ran' && m.start >= lagFrom && m.start < killedAt).length;
    const notes = [
      synchronous
        ? `synchronous standby; killed ${((killedAt - longStarted) / 1_000).toFixed(1)} s into a 6 s run`
        : `async standby held ${((killedAt - lagFrom) / 1_000).toFixed(1)} s behind (${lostRuns} runs started in that window), killed ${((killedAt - longStarted) / 1_000).toFixed(1)} s into a 6 s run ${longStarted > lagFrom ? 'whose take was lost' : 'whose take had reached the standby'}`,
      `promoted and re-pointed ${((repointedAt - killedAt) / 1_000).toFixed(1)} s after the kill`,
      `jobs ran again after the kill: ${resumed.join(', ')} (lockAtMostFor 8 s short, 15 s long)`,
      `overlapping runs ${figures.overlapping}`,
      `history rows lost ${figures.historyLost}, left 'running' ${figures.historyUnfinished}`,
      `logged by the ${REPLICAS} replicas from the kill on: ${loggedSummary(messages, killedAt)}`,
    ];
    process.stderr.write(`\n[postgres-failover ${synchronous ? 'sync' : 'async'}] ${JSON.stringify({ ...figures, notes }, null, 2)}\n`);
    recordTopologyFigure({
      topology: `PostgreSQL primary + ${synchronous ? 'synchronous' : 'asynchronous'} standby`,
      scenario: `primary killed at ${Math.round((killedAt - startedAt) / 1_000)} s during a 6 s run, standby promoted, proxy re-pointed`,
      dialect: 'postgres',
      seconds: Math.round((stoppedAt - startedAt) / 1_000),
      replicas: REPLICAS,
      slotsExpected: figures.slotsExpected,
      slotsRanOnce: figures.slotsRanOnce,
      duplicated: figures.duplicated,
      missed: figures.missed,
      notes,
    });

    // Every job ran again on the promoted standby.
    for (const job of [...SHORT_JOBS, 'long']) expect(figures.resumedAfterMs[job], `${job} ran after the failover`).toBeDefined();
    if (synchronous) {
      // Nothing a commit returned is lost: no slot twice, no overlap, every run has its row.
      expect(figures.duplicated).toBe(0);
      expect(figures.overlapping).toBe(0);
      expect(figures.historyLost).toBe(0);
    } else {
      // The window is measured, not promised away: the runs of the lost seconds lost their rows.
      expect(lostRuns).toBeGreaterThan(0);
    }
  } finally {
    for (const replica of replicas) replica.child.kill('SIGKILL');
    await pair.stop();
  }
}

describe.concurrent('PostgreSQL failover to a promoted standby', () => {
  it('synchronous standby: no slot runs twice, nothing is lost', () => failover(true));
  it('asynchronous standby 3 s behind: the window is measured', () => failover(false));
});
