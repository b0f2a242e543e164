// Figure 12: the dashboard on a big history. Per dialect: a runs table of `runs` rows (1,000,000 in
// the full run) over 1,000 declared jobs, written set-based (test/support/history-seed.ts); the
// overview, a job page and `guard.slots()` timed through a real node:http server (a fresh
// dashboard per request, so that its one-second shared reads never answer from memory); the same
// overview at 10,000 jobs (a page in the middle); and ten job pages loaded at once beside a
// guarded every-second job of the same process, whose start delay is the figure. The plans (an
// index, bounded rows) are checked by test/dashboard-reads.test.ts.
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createGuard, type DialectName } from '../../src/index.js';
import { openRaw } from '../support/raw-database.js';
import { seededJob, seedHistory, seedMoreJobs } from '../support/history-seed.js';
import { series, type Summary } from './measure.js';

/** Targets for the p50 of one read, in ms; the added start delay of the guarded job, in ms. */
export const DASHBOARD_TARGET_MS: Readonly<Record<DialectName, number>> = { postgres: 100, mysql: 100, sqlite: 200 };
export const DELAY_TARGET_MS = 20;
/** Ten schedules, one per concurrent job page: each page's walk starts cold. */
const EXPRESSIONS = Array.from({ length: 10 }, (_, k) => (k === 0 ? '* * * * * *' : `*/${k + 1} * * * * *`));

export interface DashboardFigure {
  readonly dialect: DialectName;
  readonly runs: number;
  readonly jobs: number;
  readonly seedSeconds: number;
  readonly overview: Summary;
  readonly jobPage: Summary;
  readonly slots: Summary;
  readonly overviewMoreJobs: Summary;
  readonly moreJobs: number;
  /** The guarded every-second job's start delay (ms): alone, then while ten job pages load. */
  readonly delay: {
    readonly aloneMaxMs: number;
    readonly loadedMaxMs: number;
    readonly fires: number;
    readonly loadMs: number;
    /** The event loop's longest delay while the pages loaded (perf_hooks, 5 ms resolution): what the timers waited. */
    readonly loopMaxMs: number;
    /**
     * The longest stretch of this process's CPU time between two ticks of a 1 ms timer while the
     * pages loaded: what the process itself held its timers for, without the waits for a core that
     * a loaded machine adds to the event loop's delay (as test/ledger-walk-turns.test.ts measures).
     */
    readonly cpuStretchMaxMs: number;
    /** The guarded job's longest acquire while the pages loaded (its start delay less the timer's lateness is mostly this). */
    readonly acquireMaxMs: number;
  };
}

export async function dashboardFigure(
  dialect: DialectName,
  url: string,
  { runs, jobs, moreJobs, iterations }: { runs: number; jobs: number; moreJobs: number; iterations: number },
): Promise<DashboardFigure> {
  const prefix = 'bench_dash_';
  const guard = createGuard({ database: url, tablePrefix: prefix, telemetry: false });
  const raw = await openRaw(dialect, url);
  let current: RequestListener = guard.dashboard();
  const server = createServer((req, res) => current(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    await guard.migrate();
    const seeding = performance.now();
    // Every other job declared, on one of ten every-few-seconds schedules.
    await seedHistory(raw, dialect, prefix, { runs, jobs, schedule: (job) => (job % 2 === 0 ? EXPRESSIONS[(job / 2) % 10] : undefined) });
    const seedSeconds = (performance.now() - seeding) / 1_000;
    const load = async (path: string): Promise<void> => {
      current = guard.dashboard();
      const response = await fetch(`${base}${path}`);
      await response.text();
      if (response.status !== 200) throw new Error(`${path}: ${response.status}`);
    };

    // First, while every schedule's walk is cold: ten job pages (7 d, each its own schedule) at once
    // beside a guarded every-second job, and the same job alone before.
    const delays: number[] = [];
    const task = guard.schedule('* * * * * *', { name: 'bench-every-second', lockAtMostFor: '10s' }, (context) => {
      delays.push(Date.now() - (context.slot?.getTime() ?? Date.now()));
    });
    while (delays.length < 6) await sleep(200);
    const alone = delays.splice(0);
    // The mechanism, apart from the start delay: how long the event loop was held (timers late),
    // and how long a run (its take, its history row, its release) of the guard's pool took meanwhile (its wait for a connection).
    const loop = monitorEventLoopDelay({ resolution: 5 });
    const acquires: number[] = [];
    let loadingDone = false;
    const probeAcquires = (async () => {
      while (!loadingDone) {
        const started = performance.now();
        await guard.run({ name: 'bench-acquire-probe', lockAtMostFor: '10s' }, () => undefined);
        acquires.push(performance.now() - started);
        await sleep(50);
      }
    })();
    const cpuMs = (): number => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1_000;
    };
    let lastCpu = cpuMs();
    let cpuStretchMaxMs = 0;
    const cpuTicker = setInterval(() => {
      const now = cpuMs();
      cpuStretchMaxMs = Math.max(cpuStretchMaxMs, now - lastCpu);
      lastCpu = now;
    }, 1);
    loop.enable();
    const loading = performance.now();
    await Promise.all(EXPRESSIONS.map((_, k) => load(`/job?name=${seededJob(2 * k)}&range=7d`)));
    const loadMs = performance.now() - loading;
    loop.disable();
    clearInterval(cpuTicker);
    loadingDone = true;
    await probeAcquires;
    const loaded = delays.splice(0);
    await task.stop();

    const overview = await series(iterations, () => load('/'));
    const jobPage = await series(iterations, () => load(`/job?name=${seededJob(2)}`));
    const slots = await series(iterations, () => guard.slots({ job: seededJob(2) }));
    await seedMoreJobs(raw, dialect, prefix, { from: jobs, to: moreJobs, expression: '*/5 * * * *' });
    const overviewMoreJobs = await series(iterations, () => load(`/?after=${seededJob(Math.floor(moreJobs / 2))}`));
    return {
      dialect,
      runs,
      jobs,
      seedSeconds,
      overview,
      jobPage,
      slots,
      overviewMoreJobs,
      moreJobs,
      delay: {
        aloneMaxMs: Math.max(...alone.slice(1)),
        loadedMaxMs: loaded.length === 0 ? Number.NaN : Math.max(...loaded),
        fires: loaded.length,
        loadMs,
        loopMaxMs: loop.max / 1e6,
        cpuStretchMaxMs,
        acquireMaxMs: acquires.length === 0 ? Number.NaN : Math.max(...acquires),
      },
    };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await guard.close();
    for (const table of ['runs', 'locks', 'jobs', 'controls', 'replicas', 'schema_migrations', 'migrations', 'migrations_lock']) {
      await raw.exec(`DROP TABLE IF EXISTS ${prefix}${table}`).catch(() => undefined);
    }
    await raw.close();
  }
}

export function dashboardLines(figures: readonly DashboardFigure[], verdict: (met: boolean) => string): string[] {
  if (figures.length === 0) return ['Not measured.', ''];
  const ms = (us: number): string => `${(us / 1_000).toFixed(1)} ms`;
  const first = figures[0] as DashboardFigure;
  const lines = [
    `A runs table of ${first.runs.toLocaleString('en-US')} rows over ${first.jobs.toLocaleString('en-US')} jobs (lock rows; every other one declared on ` +
      `one of ten every-few-seconds schedules), written set-based; each read through a real node:http server, a fresh dashboard each time ` +
      `(its one-second shared reads never answer), p50 (p99) of the series. Overview: the first page of 50 jobs (lock rows, newest ` +
      `50 runs or slots each, problems); job page: the default axis (the job's last 200 runs) with its slot ledger; \`guard.slots({ job })\`: ` +
      `the last 24 h of an every-second schedule (the newest 10,000 slots); then the overview's page in the middle of ` +
      `${first.moreJobs.toLocaleString('en-US')} jobs. Targets: p50 ≤ 100 ms on PostgreSQL and MariaDB, ≤ 200 ms on SQLite.`,
    '',
    '| dialect | overview | job page | guard.slots() | overview at 10,000 jobs | target | seeded in |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const figure of figures) {
    const target = DASHBOARD_TARGET_MS[figure.dialect] * 1_000;
    const met = [figure.overview, figure.jobPage, figure.slots, figure.overviewMoreJobs].every((summary) => summary.p50 <= target);
    lines.push(
      `| ${figure.dialect} | ${ms(figure.overview.p50)} (${ms(figure.overview.p99)}) | ${ms(figure.jobPage.p50)} (${ms(figure.jobPage.p99)}) | ` +
        `${ms(figure.slots.p50)} (${ms(figure.slots.p99)}) | ${ms(figure.overviewMoreJobs.p50)} (${ms(figure.overviewMoreJobs.p99)}) | ` +
        `${verdict(met)} | ${figure.seedSeconds.toFixed(0)} s |`,
    );
  }
  lines.push(
    '',
    `Ten job pages at once (the 7 d axis of ten jobs on ten schedules, each walk cold: 10,000 fires of node-cron's matcher each) beside a ` +
      `guarded every-second job (\`guard.schedule('* * * * * *')\`) of the same process: its start delay after its slot. Target: the ` +
      `pages add ≤ ${DELAY_TARGET_MS} ms.`,
    '',
    '| dialect | start delay alone (max) | while the ten pages load (max, fires) | added | pages took | event loop held (max) | CPU held (max) | an acquire meanwhile (max) | target |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  );
  for (const figure of figures) {
    const { aloneMaxMs, loadedMaxMs, fires, loadMs, loopMaxMs, cpuStretchMaxMs, acquireMaxMs } = figure.delay;
    const added = loadedMaxMs - aloneMaxMs;
    lines.push(
      `| ${figure.dialect} | ${aloneMaxMs.toFixed(0)} ms | ${fires === 0 ? 'no fire during the loads' : `${loadedMaxMs.toFixed(0)} ms (${fires})`} | ` +
        `${fires === 0 ? '—' : `${Math.max(0, added).toFixed(0)} ms`} | ${(loadMs / 1_000).toFixed(1)} s | ${loopMaxMs.toFixed(0)} ms | ${cpuStretchMaxMs.toFixed(0)} ms | ${acquireMaxMs.toFixed(0)} ms | ${fires === 0 ? 'not measured' : verdict(added <= DELAY_TARGET_MS)} |`,
    );
  }
  lines.push('');
  return lines;
}
