// Figure 7: tick-to-start latency. From a slot's nominal time to the job body starting on the
// replica that won it, with 3 replica processes per system, beside pg-boss's `schedule()` and
// graphile-worker's crontab running the same schedule on the same PostgreSQL, at the same time
// (one run: the three share the machine's noise alike). The peers' crontabs have minute
// granularity, so the full run measures `jobs` once-a-minute jobs over `slots` minute boundaries;
// the quick and smoke runs measure cronguard alone on a once-a-second schedule.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { TimelineNote } from './fire-timeline.js';
import { summarize, type Summary } from './measure.js';

/** `node-cron`: plain node-cron tasks, no guard (the floor; the fire timeline only). */
export type TickSystem = 'cronguard' | 'pg-boss' | 'graphile-worker' | 'node-cron';

/** Everything a replica runs with, decided here so that the report states exactly that. */
export interface TickWorkerSetup {
  readonly namespace: string;
  readonly expression: string;
  readonly jobs: number;
  readonly cronguard: { readonly lockAtMostFor: string };
  readonly pgBoss: {
    readonly cronMonitorIntervalSeconds: number;
    readonly cronWorkerIntervalSeconds: number;
    readonly pollingIntervalSeconds: number;
  };
  readonly graphileWorker: { readonly concurrency: number; readonly pollInterval: number };
  /** Whether the replica keeps the steps of every fire and sends them at its stop (fire-timeline.ts). */
  readonly timeline?: boolean;
}

/** Replica → parent. `slot` and `started` are wall-clock milliseconds. */
export type TickMessage =
  | { type: 'ready' }
  | { type: 'run'; job: number; slot: number; started: number }
  | { type: 'error'; message: string }
  | { type: 'steps'; steps: TimelineNote[] }
  | { type: 'stopped' };

export interface TickSize {
  /** 'minute': `* * * * *` with the peers; 'second': `* * * * * *`, cronguard alone. */
  readonly cron: 'minute' | 'second';
  readonly jobs: number;
  readonly slots: number;
  /** The systems measured, instead of the mode's (the fire timeline: cronguard beside plain node-cron). */
  readonly systems?: readonly TickSystem[];
  /** Keep every fire's steps (fire-timeline.ts). */
  readonly timeline?: boolean;
}

export interface TickSystemFigure {
  readonly system: TickSystem;
  /** Follows the system's name in the report: its version, then its settings. */
  readonly configuration: string;
  /** (job, slot) pairs measured: jobs × slots. */
  readonly jobSlots: number;
  /** Pairs with at least one run; the latency samples are their first runs. */
  readonly started: number;
  readonly missed: number;
  /** Runs beyond the first of a pair. */
  readonly duplicates: number;
  /** Milliseconds from the nominal time to the first run's job body. */
  readonly latencyMs: Summary;
  /** Runs of the measured pairs per replica. */
  readonly runsPerReplica: number[];
  readonly errors: string[];
}

export interface TickLatencyFigure {
  readonly expression: string;
  readonly replicas: number;
  readonly jobs: number;
  readonly slots: number;
  readonly leadMs: number;
  readonly graceMs: number;
  readonly systems: TickSystemFigure[];
  /** With `size.timeline`: every step noted, per replica. */
  readonly steps: { readonly system: TickSystem; readonly replica: number; readonly note: TimelineNote }[];
  /** The measured slots (epoch ms). */
  readonly slotTimes: number[];
}

const REPLICAS = 3;
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;
/**
 * The lowest-latency settings each peer accepts (pg-boss 10 asserts the minimums), the peers'
 * defaults otherwise. graphile-worker: 3 replicas × 5 = one worker per job of the full run, and
 * its default pool of 10 holds them; new jobs reach it by LISTEN/NOTIFY, pollInterval is the fallback.
 */
const SETTINGS = {
  cronguard: { lockAtMostFor: '30s' },
  pgBoss: { cronMonitorIntervalSeconds: 1, cronWorkerIntervalSeconds: 1, pollingIntervalSeconds: 0.5 },
  graphileWorker: { concurrency: 5, pollInterval: 2_000 },
} as const;
const TIMING = {
  // Wait this long after every replica is ready before the first measured slot: start-up (pool
  // connects, migrations, the peers' first polls) stays out of the figure.
  minute: { periodMs: 60_000, expression: '* * * * *', leadMs: 10_000, graceMs: 15_000 },
  second: { periodMs: 1_000, expression: '* * * * * *', leadMs: 1_000, graceMs: 1_000 },
} as const;

function version(name: string): string {
  const file = new URL(`../../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

function configuration(system: TickSystem, expression: string): string {
  const { cronguard, pgBoss, graphileWorker } = SETTINGS;
  switch (system) {
    case 'cronguard':
      return `(this tree): \`guard.schedule('${expression}', { name, lockAtMostFor: '${cronguard.lockAtMostFor}' }, fn)\` per job (node-cron ${version('node-cron')}); \`telemetry: false\`; the pool it opens from the URL (max 10, idle connections kept 70 s, so they live from one minute's tick to the next)`;
    case 'pg-boss':
      return (
        `${version('pg-boss')}: a queue per job, \`schedule(name, '${expression}')\` and \`work(name, { pollingIntervalSeconds: ${pgBoss.pollingIntervalSeconds} }, fn)\` on each replica, ` +
        `\`new PgBoss({ cronMonitorIntervalSeconds: ${pgBoss.cronMonitorIntervalSeconds}, cronWorkerIntervalSeconds: ${pgBoss.cronWorkerIntervalSeconds} })\`: ` +
        'each of the three is the minimum pg-boss accepts (defaults 30, 5 and 2 s); other options default (pool max 10). ' +
        'pg-boss polls: its cron monitor puts a job on an internal send-it queue, whose worker puts the real job on the queue'
      );
    case 'node-cron':
      return `${version('node-cron')}: \`cron.schedule('${expression}', fn, { name })\` per job, no guard`;
    case 'graphile-worker':
      return (
        `${version('graphile-worker')}: \`run({ crontab, taskList, concurrency: ${graphileWorker.concurrency}, pollInterval: ${graphileWorker.pollInterval} })\` on each replica, ` +
        `a crontab line \`${expression} tick_N\` and a task per job; maxPoolSize 10 and no backfill (defaults). New jobs are announced by LISTEN/NOTIFY`
      );
  }
}

interface Replica {
  readonly system: TickSystem;
  readonly index: number;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  stopping: boolean;
}

interface Run {
  readonly system: TickSystem;
  readonly replica: number;
  readonly job: number;
  readonly slot: number;
  readonly started: number;
}

export async function tickLatency(url: string, size: TickSize): Promise<TickLatencyFigure> {
  const timing = TIMING[size.cron];
  const systems: TickSystem[] = [
    ...(size.systems ?? (size.cron === 'minute' ? ['cronguard', 'pg-boss', 'graphile-worker'] : ['cronguard'])),
  ];
  const setup: TickWorkerSetup = {
    namespace: `tick_${Date.now()}`,
    expression: timing.expression,
    jobs: size.jobs,
    ...SETTINGS,
    timeline: size.timeline === true,
  };
  const worker = fileURLToPath(new URL('tick-latency-worker.ts', import.meta.url));
  const replicas: Replica[] = [];
  const runs: Run[] = [];
  const steps: TickLatencyFigure['steps'][number][] = [];
  const errors = new Map<TickSystem, string[]>(systems.map((system) => [system, []]));

  let closing = false;
  const start = (system: TickSystem, index: number): Promise<void> => {
    // Once stopAll has begun (another replica failed), a late start must not fork a replica it would miss.
    if (closing) return Promise.reject(new Error(`${system} replica ${index} not started: the figure is stopping`));
    const child = fork(worker, [system, url, JSON.stringify(setup)], { execArgv: ['--import', 'tsx'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const replica: Replica = { system, index, child, exited, stopping: false };
    replicas.push(replica);
    const systemErrors = errors.get(system) ?? [];
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${system} replica ${index} not ready after ${READY_TIMEOUT_MS} ms`)),
        READY_TIMEOUT_MS,
      );
      child.on('message', (raw) => {
        const message = raw as TickMessage;
        if (message.type === 'ready') {
          clearTimeout(timer);
          resolve();
        } else if (message.type === 'run') {
          runs.push({ system, replica: index, job: message.job, slot: message.slot, started: message.started });
        } else if (message.type === 'steps') {
          for (const note of message.steps) steps.push({ system, replica: index, note });
        } else if (message.type === 'error') {
          systemErrors.push(`replica ${index}: ${message.message}`);
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!replica.stopping) systemErrors.push(`replica ${index} exited early (code ${String(code)}, signal ${String(signal)})`);
        reject(new Error(`${system} replica ${index} exited before it was ready: ${systemErrors.join('; ')}`));
      });
    });
  };

  let firstSlot = 0;
  try {
    // cronguard's replicas start together (migrate() is safe from every replica at once). Each
    // peer's first replica creates its schema, queues and schedules alone, then the other two
    // start: the peers' docs do not promise concurrent first installs. One system after the
    // other: cronguard's migrate() (Kysely's Migrator, which lists every schema's tables) failed
    // once with "relation … does not exist" while graphile-worker created its schema at that instant.
    for (const system of systems) {
      if (system === 'cronguard' || system === 'node-cron') {
        await Promise.all(Array.from({ length: REPLICAS }, (_, index) => start(system, index)));
      } else {
        await start(system, 0);
        await Promise.all(Array.from({ length: REPLICAS - 1 }, (_, index) => start(system, index + 1)));
      }
    }
    firstSlot = Math.ceil((Date.now() + timing.leadMs) / timing.periodMs) * timing.periodMs;
    const lastSlot = firstSlot + (size.slots - 1) * timing.periodMs;
    await sleep(lastSlot + timing.graceMs - Date.now());
  } finally {
    closing = true;
    await stopAll(replicas);
  }

  const slots = Array.from({ length: size.slots }, (_, i) => firstSlot + i * timing.periodMs);
  return {
    expression: timing.expression,
    replicas: REPLICAS,
    jobs: size.jobs,
    slots: size.slots,
    leadMs: timing.leadMs,
    graceMs: timing.graceMs,
    steps,
    slotTimes: slots,
    systems: systems.map((system) => {
      const byPair = new Map<string, Run[]>();
      for (const run of runs) {
        if (run.system !== system) continue;
        const key = `${run.job}@${run.slot}`;
        byPair.set(key, [...(byPair.get(key) ?? []), run]);
      }
      const samples: number[] = [];
      const runsPerReplica = Array.from({ length: REPLICAS }, () => 0);
      let missed = 0;
      let duplicates = 0;
      for (let job = 0; job < size.jobs; job += 1) {
        for (const slot of slots) {
          const pair = byPair.get(`${job}@${slot}`) ?? [];
          if (pair.length === 0) missed += 1;
          else samples.push(Math.min(...pair.map((run) => run.started)) - slot);
          duplicates += Math.max(0, pair.length - 1);
          for (const run of pair) runsPerReplica[run.replica] = (runsPerReplica[run.replica] ?? 0) + 1;
        }
      }
      const noSlot = runs.filter((run) => run.system === system && Number.isNaN(run.slot)).length;
      const systemErrors = errors.get(system) ?? [];
      if (noSlot > 0) systemErrors.push(`${noSlot} run(s) without a nominal time`);
      return {
        system,
        configuration: configuration(system, timing.expression),
        jobSlots: size.jobs * size.slots,
        started: samples.length,
        missed,
        duplicates,
        latencyMs: summarize(samples),
        runsPerReplica,
        errors: systemErrors,
      };
    }),
  };
}

/** Asks every replica to stop cleanly, then kills what is left after STOP_TIMEOUT_MS; waits for every exit. */
async function stopAll(replicas: Replica[]): Promise<void> {
  for (const replica of replicas) {
    replica.stopping = true;
    if (replica.child.connected) replica.child.send('stop');
  }
  const all = Promise.all(replicas.map((replica) => replica.exited));
  const timer = setTimeout(() => {
    for (const replica of replicas) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGKILL');
  }, STOP_TIMEOUT_MS);
  await all;
  clearTimeout(timer);
}

function ms(value: number): string {
  if (!Number.isFinite(value)) return '-';
  return `${Math.abs(value) < 100 ? value.toFixed(1) : value.toFixed(0)} ms`;
}

/** The body of BENCHMARKS.md's section 7; `mode` is the bench's (full, quick, smoke). */
export function tickLatencyLines(figure: TickLatencyFigure, mode: string): string[] {
  const pairs = figure.jobs * figure.slots;
  const verdict = (met: boolean): string => (met ? 'met' : '**not met**');
  // An error reaches a table cell: one line, no pipes, not too long.
  const errorCell = (errors: string[]): string =>
    errors.length === 0 ? '0' : `${errors.length}: ${(errors[0] ?? '').replace(/\s+/g, ' ').replaceAll('|', '\\|').slice(0, 200)}`;
  return [
    `From a slot's nominal time to the job body starting on the replica that won it (the body only notes the time): ${figure.replicas} replica processes per system, ` +
      `${figure.jobs} jobs on \`${figure.expression}\`, ${figure.slots} slots each: ${pairs} (job, slot) pairs per system, on the PostgreSQL above. ` +
      `The first measured slot is at least ${figure.leadMs / 1_000} s after every replica is ready. ` +
      (figure.systems.length > 1
        ? 'pg-boss and graphile-worker run the same schedule on the same server at the same time as cronguard: one run, the same noise for all. '
        : `Measured in \`--${mode}\` mode: cronguard alone, on a once-a-second schedule; the peers' crontabs have minute granularity, ` +
          'so the comparison with pg-boss and graphile-worker is in the full run only. ') +
      `A pair with no run within ${figure.graceMs / 1_000} s of the last slot is missed; every run after the first of a pair is a duplicate` +
      `${pairs <= 100 ? `; p99 of ${pairs} samples is their largest` : ''}. ` +
      "A replica sends the acquires of a slot's jobs as one statement (a batch), so cronguard's pairs of one slot share one answer: " +
      'they are about one sample per slot, not one per job, and agree within a few ms.',
    '',
    '| system | pairs started | duplicates | missed | exactly one run per pair | p50 | p99 | runs per replica | errors |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...figure.systems.map(
      (s) =>
        `| ${s.system} | ${s.started} / ${s.jobSlots} | ${s.duplicates} | ${s.missed} | ${s.system === 'node-cron' ? 'no guard: every process runs each pair (the floor)' : verdict(s.missed === 0 && s.duplicates === 0)} | ` +
        `${ms(s.latencyMs.p50)} | ${ms(s.latencyMs.p99)} | ${s.runsPerReplica.join(' / ')} | ${errorCell(s.errors)} |`,
    ),
    '',
    'Configurations:',
    '',
    ...figure.systems.map((s) => `- ${s.system} ${s.configuration}.`),
    '',
  ];
}
