// Figure 11: tick-to-start latency as the number of jobs of one tick grows (issue #19). N jobs on
// `* * * * * *` through `guard.schedule` in each of 3 replica processes, beside N plain node-cron
// tasks on the same schedule in the same processes (what the replica's event loop and node-cron
// cost without any lock), for N = 1, 10, 100, 500 on every dialect. Also counts the statements
// each replica's driver is asked to send per tick (see tick-scale-worker.ts): the target is a
// count that does not grow with N.
import { fork, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { DialectName } from '../../src/index.js';
import { summarize, type Summary } from './measure.js';

export interface TickScaleSetup {
  readonly namespace: string;
  readonly expression: string;
  readonly jobs: number;
  readonly lockAtMostFor: string;
}

export interface ScaleRun {
  readonly system: 'cronguard' | 'node-cron';
  readonly job: number;
  /** The fire's nominal time, wall-clock ms. */
  readonly slot: number;
  /** When the body started, wall-clock ms. */
  readonly started: number;
}

/** Replica → parent: ready once its tasks are scheduled; its result once told to stop. */
export type ScaleMessage =
  { type: 'ready' } | { type: 'result'; runs: ScaleRun[]; errors: string[]; statements: [second: number, count: number][] };

export interface ScalePoint {
  readonly dialect: DialectName;
  readonly jobs: number;
  readonly slots: number;
  /** cronguard: the winner's start per (job, slot); pairs without a run are missed, runs beyond the first duplicates. */
  readonly cronguard: Summary;
  readonly missed: number;
  readonly duplicates: number;
  /** node-cron alone: every replica's start of every (job, slot), since each replica runs each. */
  readonly nodeCron: Summary;
  /**
   * cronguard's start of each (job, slot) minus the last node-cron start of that slot in the process
   * that won it: how long after node-cron's own timers of that second the guarded body started.
   */
  readonly afterOwnTimers: Summary;
  /** Statements each replica's driver sent per measured tick: mean over the replicas, and the largest. */
  readonly statementsPerTick: { readonly mean: number; readonly max: number };
  /** Runs of cronguard jobs each replica started per measured tick (each of which releases its lock): mean, largest. */
  readonly winsPerTick: { readonly mean: number; readonly max: number };
  readonly errors: string[];
}

export interface TickScaleSize {
  readonly jobs: readonly number[];
  /** Measured slots (seconds) per point. */
  readonly slots: number;
}

const REPLICAS = 3;
const EXPRESSION = '* * * * * *';
/** After every replica is ready, the first slot measured is at least this far ahead (the warm-up ticks run meanwhile). */
const LEAD_MS = 2_000;
/** After the last slot measured, how long its runs have to start. */
const GRACE_MS = 1_500;
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

interface Replica {
  readonly child: ChildProcess;
  readonly result: Promise<Extract<ScaleMessage, { type: 'result' }>>;
}

/** One point: N jobs × 3 replicas on one dialect. */
export async function tickScalePoint(dialect: DialectName, url: string, jobs: number, slots: number): Promise<ScalePoint> {
  const setup: TickScaleSetup = { namespace: `scale_${jobs}_${Date.now()}`, expression: EXPRESSION, jobs, lockAtMostFor: '30s' };
  const worker = fileURLToPath(new URL('tick-scale-worker.ts', import.meta.url));
  const replicas: Replica[] = [];
  const ready: Promise<void>[] = [];
  for (let index = 0; index < REPLICAS; index += 1) {
    const child = fork(worker, [dialect, url, JSON.stringify(setup)], { execArgv: ['--import', 'tsx'] });
    let onReady: () => void = () => undefined;
    let onFailed: (error: Error) => void = () => undefined;
    ready.push(
      new Promise<void>((resolve, reject) => {
        onReady = resolve;
        onFailed = reject;
      }),
    );
    const timer = setTimeout(() => onFailed(new Error(`replica ${index} not ready after ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
    const result = new Promise<Extract<ScaleMessage, { type: 'result' }>>((resolve) => {
      child.on('message', (raw) => {
        const message = raw as ScaleMessage;
        if (message.type === 'ready') {
          clearTimeout(timer);
          onReady();
        } else {
          clearTimeout(timer);
          onFailed(new Error(`replica ${index} stopped: ${message.errors.join('; ')}`));
          resolve(message);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        onFailed(new Error(`replica ${index} exited (code ${String(code)})`));
        resolve({ type: 'result', runs: [], errors: [`replica ${index} exited (code ${String(code)}) without a result`], statements: [] });
      });
    });
    replicas.push({ child, result });
  }
  let firstSlot = 0;
  try {
    await Promise.all(ready);
    firstSlot = Math.ceil((Date.now() + LEAD_MS) / 1_000) * 1_000;
    await sleep(firstSlot + (slots - 1) * 1_000 + GRACE_MS - Date.now());
  } finally {
    for (const { child } of replicas) if (child.connected) child.send('stop');
  }
  const killer = setTimeout(() => {
    for (const { child } of replicas) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }, STOP_TIMEOUT_MS);
  const results = await Promise.all(replicas.map((replica) => replica.result));
  clearTimeout(killer);

  const measured = Array.from({ length: slots }, (_, i) => firstSlot + i * 1_000);
  const inWindow = new Set(measured);
  const firstRuns = new Map<string, { latency: number; replica: number }[]>();
  const plain: number[] = [];
  /** The last node-cron start of each slot in each replica, by `${replica}@${slot}`: wall-clock ms. */
  const lastPlain = new Map<string, number>();
  results.forEach(({ runs }, replica) => {
    for (const run of runs) {
      if (!inWindow.has(run.slot)) continue;
      if (run.system === 'node-cron') {
        plain.push(run.started - run.slot);
        const key = `${replica}@${run.slot}`;
        lastPlain.set(key, Math.max(lastPlain.get(key) ?? Number.NEGATIVE_INFINITY, run.started));
      } else {
        const key = `${run.job}@${run.slot}`;
        firstRuns.set(key, [...(firstRuns.get(key) ?? []), { latency: run.started - run.slot, replica }]);
      }
    }
  });
  const guarded: number[] = [];
  const afterOwnTimers: number[] = [];
  let duplicates = 0;
  for (const [key, starts] of firstRuns) {
    const first = starts.reduce((a, b) => (b.latency < a.latency ? b : a));
    guarded.push(first.latency);
    const slot = Number(key.slice(key.indexOf('@') + 1));
    const last = lastPlain.get(`${first.replica}@${slot}`);
    if (last !== undefined) afterOwnTimers.push(slot + first.latency - last);
    duplicates += starts.length - 1;
  }
  const wins = results.map(({ runs }) => runs.filter((run) => run.system === 'cronguard' && inWindow.has(run.slot)).length / slots);
  const perTick = results.map(({ statements }) => {
    const bySecond = new Map(statements);
    return measured.reduce((sum, slot) => sum + (bySecond.get(slot / 1_000) ?? 0), 0) / slots;
  });
  return {
    dialect,
    jobs,
    slots,
    cronguard: summarize(guarded),
    missed: jobs * slots - firstRuns.size,
    duplicates,
    nodeCron: summarize(plain),
    afterOwnTimers: summarize(afterOwnTimers),
    statementsPerTick: { mean: mean(perTick), max: Math.max(...perTick) },
    winsPerTick: { mean: mean(wins), max: Math.max(...wins) },
    errors: results.flatMap(({ errors }, index) => errors.map((error) => `replica ${index}: ${error}`)),
  };
}

/** Every point of the figure, one after another (each alone on the machine). */
export async function tickScale(targets: readonly [DialectName, string][], size: TickScaleSize): Promise<ScalePoint[]> {
  const points: ScalePoint[] = [];
  for (const [dialect, url] of targets) {
    for (const jobs of size.jobs) {
      console.error(`cronguard bench: tick-to-start at scale on ${dialect}, ${jobs} job(s) × ${REPLICAS} replicas × ${size.slots} slots…`);
      points.push(await tickScalePoint(dialect, url, jobs, size.slots));
    }
  }
  return points;
}

function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

function ms(value: number): string {
  return Number.isFinite(value) ? value.toFixed(1) : '-';
}

/** The section's text and table (BENCHMARKS.md section 11, or printed alone). */
export function tickScaleLines(points: readonly ScalePoint[]): string[] {
  const verdict = (point: ScalePoint): string => {
    if (point.jobs !== 100) return '';
    return point.cronguard.p99 <= point.nodeCron.p99 + 5 ? 'met' : '**not met**';
  };
  const errorCell = (errors: string[]): string =>
    errors.length === 0 ? '0' : `${errors.length}: ${(errors[0] ?? '').replace(/\s+/g, ' ').replaceAll('|', '\\|').slice(0, 160)}`;
  return [
    `N jobs on \`${EXPRESSION}\` through \`guard.schedule\` in each of ${REPLICAS} replica processes per dialect, beside N plain node-cron ` +
      "tasks on the same schedule in the same processes and run (no lock). Milliseconds from the slot's second to the job body starting: " +
      "for cronguard the winner's start of each (job, slot); for node-cron every replica's start. " +
      `${points[0]?.slots ?? '?'} slots per point, the first at least ${LEAD_MS / 1_000} s after every replica is ready. ` +
      "Statements: the calls each replica's database driver was asked to make during the measured seconds (pg `Client#query`, " +
      'mysql2 `Connection#query`/`#execute`, better-sqlite3 statement runs and `exec`, `BEGIN`/`COMMIT` included), wrapped in the ' +
      'replica process, per tick: every statement the guard sends, background work included; beside it, the runs each replica won per ' +
      'tick (the releases of the runs that end together go together, where the dialect batches them). Target (issue #19): cronguard p99 within ' +
      "node-cron's p99 + 5 ms at N = 100; statements per replica per tick independent of N.",
    '',
    '"After the replica\'s own node-cron timers": each cronguard start minus the last plain node-cron start of the same slot in the ' +
      'process that won it. A database answer is read only once Node has run every timer due (its timers phase, which holds that ' +
      "second's node-cron tasks, plain and guarded), so on PostgreSQL and MySQL a guarded body cannot start before that process's last " +
      'plain task of the second; this column is what the guard adds after it. Negative on SQLite, whose statements answer within the ' +
      'timer that sent them.',
    '',
    "| dialect | jobs | cronguard p50 / p99 | node-cron p50 / p99 | cronguard after the replica's own node-cron timers p50 / p99 | missed | duplicates | statements per replica per tick (mean / max) | runs won per replica per tick (mean / max) | p99 target | errors |",
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...points.map(
      (p) =>
        `| ${p.dialect} | ${p.jobs} | ${ms(p.cronguard.p50)} / ${ms(p.cronguard.p99)} | ${ms(p.nodeCron.p50)} / ${ms(p.nodeCron.p99)} | ` +
        `${ms(p.afterOwnTimers.p50)} / ${ms(p.afterOwnTimers.p99)} | ` +
        `${p.missed} | ${p.duplicates} | ${p.statementsPerTick.mean.toFixed(1)} / ${p.statementsPerTick.max.toFixed(1)} | ` +
        `${p.winsPerTick.mean.toFixed(1)} / ${p.winsPerTick.max.toFixed(1)} | ${verdict(p)} | ${errorCell(p.errors)} |`,
    ),
    '',
  ];
}
