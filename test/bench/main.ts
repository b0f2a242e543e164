// `npm run bench`: starts its own databases (a SQLite file, embedded PostgreSQL, MariaDB), measures
// every figure on each dialect, and writes BENCHMARKS.md. `-- --quick` for a shorter run (under a
// minute), `-- --smoke` for CI (tiny counts, written to a temporary file unless --out is given),
// `-- --long` for the full run with figure 5 at the issue's size (100 names × 1,000 slots: about
// 25 minutes here). `-- --only scale` runs figure 11 alone and prints its table (no file written), `-- --only ticks` figure 7, `-- --only reference` figure 4,
// `-- --only timeline` the fire timeline (`--timeline-cron minute|second`, `--timeline-slots N`, `--timeline-peers`: figure 7's peers beside), `-- --only contention` figure 5, `-- --only dashboard` figure 12 (the issue's size: 1,000,000 runs; `--quick` 100,000); `--scale-jobs 1,10` and `--dialects postgres` narrow them, `--scale-slots 20`
// measures more slots per point (a p99 steadier than the default's).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CompiledQuery } from 'kysely';
import type { DialectName } from '../../src/index.js';
import { findMariadbd, startMariadb, startPostgres, type RunningDatabase } from '../setup/databases.js';
import { openDriver } from './drivers.js';
import { capacityLines } from './capacity.js';
import { dashboardFigure, dashboardLines, type DashboardFigure } from './dashboard-reads.js';
import { contentionAlone, dashboardAlone, fireTimelineAlone, referenceAlone, tickLatencyAlone, tickScaleAlone } from './figures-alone.js';
import { historyPage, historyPageLines, type HistoryPageFigure } from './history-page.js';
import { contention, contentionLines, mysqlWithoutProcedure, type ContentionFigure } from './contention.js';
import { measureDialect, memoryGrowth, referenceLines, type DialectFigures, type MemoryFigure } from './figures.js';
import { missesLines } from './misses.js';
import { ratio, us, type Summary } from './measure.js';
import { timelineTableLines } from './fire-timeline.js';
import { tickLatency, tickLatencyLines, type TickLatencyFigure, type TickSize } from './tick-latency.js';
import { tickScale, tickScaleLines, type ScalePoint, type TickScaleSize } from './tick-scale.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    smoke: { type: 'boolean' },
    long: { type: 'boolean' },
    out: { type: 'string' },
    only: { type: 'string' },
    'scale-jobs': { type: 'string' },
    'scale-slots': { type: 'string' },
    dialects: { type: 'string' },
    'timeline-cron': { type: 'string' },
    'timeline-slots': { type: 'string' },
    'timeline-peers': { type: 'boolean' },
  },
});
if (values.only !== undefined && !['scale', 'ticks', 'contention', 'dashboard', 'timeline', 'reference'].includes(values.only))
  throw new Error(
    `--only: the figures that run alone are 'scale', 'ticks', 'contention', 'dashboard', 'timeline' and 'reference', got ${values.only}`,
  );
const mode = values.smoke === true ? 'smoke' : values.quick === true ? 'quick' : 'full';
const long = mode === 'full' && values.long === true;
const iterations = { full: 2_000, quick: 100, smoke: 20 }[mode];
/** Figure 8: the target compares RSS after `small` and `large` runs; `warm` and `longer` (full run only) show whether it levels off. */
const memoryCounts = {
  full: { small: 1_000, large: 100_000, warm: 10_000, longer: 200_000 },
  quick: { small: 1_000, large: 5_000 },
  smoke: { small: 100, large: 1_000 },
}[mode] as { small: number; large: number; warm?: number; longer?: number };
/** Figure 5: processes, contenders per process, job names, slots. The issue's size (100 × 1,000) only with --long. */
const contentionSize = (long ? [8, 2, 100, 1_000] : { full: [8, 2, 100, 20], quick: [8, 2, 20, 5], smoke: [2, 2, 3, 2] }[mode]) as [
  number,
  number,
  number,
  number,
];
/**
 * Figure 7: jobs × slots, at least 30 (job, slot) pairs except in smoke. Full: 15 once-a-minute jobs
 * × 2 minute boundaries (about 2.5 minutes) beside pg-boss and graphile-worker, whose crontabs have
 * minute granularity. Quick and smoke cannot wait for a minute boundary: cronguard alone on a
 * once-a-second schedule, many jobs × few slots, as start-up (~3 s for 3 tsx processes) dominates.
 */
const tickSize: TickSize = {
  full: { cron: 'minute', jobs: 15, slots: 2 } as const,
  quick: { cron: 'second', jobs: 10, slots: 3 } as const,
  smoke: { cron: 'second', jobs: 2, slots: 3 } as const,
}[mode];
/**
 * Figure 11: jobs per tick (all on one every-second schedule), and the slots measured at each. The
 * smoke takes one point per dialect: each point starts its replica processes afresh (~9 s here), and a
 * second point would run the same code again.
 */
const scaleSize: TickScaleSize = {
  jobs: values['scale-jobs']?.split(',').map(Number) ?? { full: [1, 10, 100, 500], quick: [1, 100], smoke: [10] }[mode],
  slots: values['scale-slots'] === undefined ? { full: 10, quick: 3, smoke: 2 }[mode] : Number(values['scale-slots']),
};
if (values.only === 'scale') {
  await tickScaleAlone(scaleSize, values.dialects?.split(','));
  process.exit(0);
}
if (values.only === 'timeline') {
  const cron = values['timeline-cron'] === 'second' ? 'second' : 'minute';
  const slots = values['timeline-slots'] === undefined ? { minute: 2, second: 20 }[cron] : Number(values['timeline-slots']);
  await fireTimelineAlone({ cron, jobs: 15, slots, peers: values['timeline-peers'] === true }, values.dialects?.split(','));
  process.exit(0);
}
if (values.only === 'contention') {
  await contentionAlone(contentionSize, values.dialects?.split(','));
  process.exit(0);
}
/** Figure 12: runs, declared jobs, the jobs of the paged overview, samples per series. */
const dashboardSize = {
  full: { runs: 1_000_000, jobs: 1_000, moreJobs: 10_000, iterations: 15 },
  quick: { runs: 100_000, jobs: 1_000, moreJobs: 10_000, iterations: 10 },
  smoke: { runs: 10_000, jobs: 100, moreJobs: 1_000, iterations: 3 },
}[mode];
if (values.only === 'dashboard') {
  await dashboardAlone(dashboardSize, values.dialects?.split(','));
  process.exit(0);
}
if (values.only === 'reference') {
  await referenceAlone(iterations, values.dialects?.split(','));
  process.exit(0);
}
if (values.only === 'ticks') {
  await tickLatencyAlone(tickSize, mode);
  process.exit(0);
}
/** Figure 10: rows in the runs table a history page is read from. */
const historyRows = { full: 1_000_000, quick: 100_000, smoke: 10_000 }[mode];
const out = values.out ?? (mode === 'smoke' ? join(mkdtempSync(join(tmpdir(), 'cronguard-bench-')), 'BENCHMARKS.md') : 'BENCHMARKS.md');

const servers: RunningDatabase[] = [];
const results: {
  dialect: DialectName;
  version: string;
  figures: DialectFigures;
  contention: ContentionFigure;
  tickContention: ContentionFigure;
}[] = [];
let memory: { pinned: MemoryFigure; adaptive: MemoryFigure } | undefined;
let ticks: TickLatencyFigure | undefined;
let history: HistoryPageFigure | undefined;
let scale: ScalePoint[] | undefined;
/** Figure 5's MySQL rows on existing lock rows, with and without the take procedure. */
const withoutProcedure: Awaited<ReturnType<typeof mysqlWithoutProcedure>> = [];
const dashboards: DashboardFigure[] = [];
/** Figure 7 on every dialect: cronguard alone on once-a-second slots (full run only; quick and smoke measure only that, on PostgreSQL). */
const ticksByDialect: { dialect: DialectName; figure: TickLatencyFigure }[] = [];
const started = Date.now();
try {
  const sqliteDir = mkdtempSync(join(tmpdir(), 'cronguard-bench-sqlite-'));
  const [postgres, mariadb] = await Promise.all([startPostgres(), findMariadbd() === undefined ? undefined : startMariadb()]);
  servers.push(postgres, ...(mariadb === undefined ? [] : [mariadb]));
  if (mariadb === undefined)
    console.error('cronguard bench: mariadbd not found; MySQL figures are missing (apt-get install -y mariadb-server)');
  const targets: [DialectName, string][] = [
    ['sqlite', `sqlite:${join(sqliteDir, 'bench.sqlite')}`],
    ['postgres', postgres.url],
    ...(mariadb === undefined ? [] : [['mysql', mariadb.url] as [DialectName, string]]),
  ];
  for (const [dialect, url] of targets) {
    console.error(`cronguard bench: ${dialect}, ${iterations} iterations per series…`);
    const driver = openDriver(dialect, url);
    try {
      const version = await serverVersion(driver.kysely, dialect);
      const figures = await measureDialect(driver, iterations);
      console.error(`cronguard bench: ${dialect}, contention…`);
      const oneAtATime = await contention(url, ...contentionSize);
      results.push({ dialect, version, figures, contention: oneAtATime, tickContention: await contention(url, ...contentionSize, true) });
      if (dialect === 'mysql') withoutProcedure.push(...(await mysqlWithoutProcedure(url, contentionSize)));
    } finally {
      await driver.close();
    }
  }
  console.error(`cronguard bench: a history page on PostgreSQL at ${historyRows.toLocaleString('en-US')} runs…`);
  history = await historyPage(postgres.url, historyRows, iterations);
  console.error(
    `cronguard bench: tick-to-start latency on PostgreSQL, ${tickSize.jobs} jobs × ${tickSize.slots} ${tickSize.cron} slots` +
      `${tickSize.cron === 'minute' ? ' beside pg-boss and graphile-worker (about 2.5 minutes)' : ''}…`,
  );
  // With node-cron alone beside (the floor) and each step of the guarded fires noted (fire-timeline.ts).
  const floor = ['cronguard', 'node-cron'] as const;
  ticks = await tickLatency(postgres.url, {
    ...tickSize,
    systems: tickSize.cron === 'minute' ? [...floor, 'pg-boss', 'graphile-worker'] : floor,
    timeline: true,
  });
  if (mode === 'full') {
    for (const [dialect, url] of targets) {
      console.error(`cronguard bench: tick-to-start latency on ${dialect}, once-a-second slots…`);
      ticksByDialect.push({ dialect, figure: await tickLatency(url, { cron: 'second', jobs: 10, slots: 3 }) });
    }
  }
  scale = await tickScale(targets, scaleSize);
  for (const [dialect, url] of targets) {
    console.error(`cronguard bench: the dashboard on ${dialect} at ${dashboardSize.runs.toLocaleString('en-US')} runs…`);
    dashboards.push(await dashboardFigure(dialect, url, dashboardSize));
  }
  const { small, large, warm, longer } = memoryCounts;
  console.error(`cronguard bench: memory, up to ${longer ?? large} executions on SQLite, twice…`);
  const checkpoints = [small, ...(warm === undefined ? [] : [warm]), large, ...(longer === undefined ? [] : [longer])];
  memory = {
    pinned: await memoryGrowth(`sqlite:${join(sqliteDir, 'memory.sqlite')}`, checkpoints, {
      pinnedYoungGeneration: true,
    }),
    adaptive: await memoryGrowth(`sqlite:${join(sqliteDir, 'memory-adaptive.sqlite')}`, [small, large], {
      pinnedYoungGeneration: false,
    }),
  };
} finally {
  await Promise.all(servers.map((server) => server.stop()));
}

writeFileSync(out, report());
console.error(`cronguard bench: wrote ${out} in ${Math.round((Date.now() - started) / 1_000)} s`);

async function serverVersion(db: import('kysely').Kysely<unknown>, dialect: DialectName): Promise<string> {
  const sql = dialect === 'sqlite' ? 'SELECT sqlite_version() AS v' : 'SELECT version() AS v';
  const { rows } = (await db.executeQuery(CompiledQuery.raw(sql))) as { rows: { v: string }[] };
  return `${dialect === 'sqlite' ? 'SQLite ' : dialect === 'postgres' ? '' : 'MariaDB/MySQL '}${rows[0]?.v ?? '?'}`;
}

function verdict(met: boolean): string {
  return met ? 'met' : '**not met**';
}

function cells(summary: Summary): string {
  return `${us(summary.p50)} / ${us(summary.p99)}`;
}

function report(): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const lines: string[] = [
    '# cronguard benchmarks',
    '',
    `Written by \`npm run bench${mode === 'full' ? (long ? ' -- --long' : '') : ` -- --${mode}`}\` on ${new Date().toISOString().slice(0, 10)}. ` +
      `Machine: ${cpus().length} × ${cpu}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}. ` +
      `Databases: ${results.map((r) => r.version.split(' on ')[0]).join('; ')}, each started by the bench on this machine (loopback).`,
    '',
    `Every comparison is a ratio of two series measured in the same run, interleaved A B A B, ${iterations} samples each after a ` +
      'warm-up; times are p50 / p99 of one call, in microseconds. These machines are noisy: read the ratios, not the absolute times.',
    '',
    '## 1. The floor: the raw driver',
    '',
    '| dialect | `SELECT 1` p50 / p99 | single-row autocommit `UPDATE` p50 / p99 |',
    '| --- | --- | --- |',
    ...results.map((r) => `| ${r.dialect} | ${cells(r.figures.floorSelect)} | ${cells(r.figures.floorUpdate)} |`),
    '',
    '## 2. Win path: `guard.run` with an empty job (acquire, history, release)',
    '',
    'A guard winning again the lock it released itself (so it skips the probe), against as many raw single-row `UPDATE`s as the win sends ' +
      'statements (SQLite counts `BEGIN` and `COMMIT`). Target ≤ 1.2×.',
    '',
    '| dialect | statements | guard p50 / p99 | floor p50 / p99 | ratio | target |',
    '| --- | --- | --- | --- | --- | --- |',
    ...results.map(
      (r) =>
        `| ${r.dialect} | ${r.figures.win.statements} | ${cells(r.figures.win.guard)} | ${cells(r.figures.win.floor)} | ${ratio(r.figures.win.ratio)} | ${verdict(r.figures.win.ratio <= 1.2)} |`,
    ),
    '',
    '## 3. Loser path: a contender that finds the lock held',
    '',
    'Against `SELECT 1`. Targets: ≤ 1.3× `SELECT 1`; 0 WAL bytes per attempt on PostgreSQL. The last columns set the loser beside the least ' +
      "a loser can cost: the probe's own read of the lock row, sent straight through the driver (no target; interleaved in a series of its own). " +
      'The last two set it beside the loser of cronguard 0.1.0, before the operator controls put the pause check into the probe ' +
      '(its own tables, interleaved): an unpaused job should lose at the same cost.',
    '',
    '| dialect | guard p50 / p99 | `SELECT 1` p50 / p99 | ratio | target | WAL bytes per attempt | guard / row read p50 | ratio to the row read | guard / 0.1.0 p50 | ratio to 0.1.0 |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...results.map((r) => {
      const { lose } = r.figures;
      const wal = lose.walBytesPerAttempt;
      const walCell = wal === null ? '-' : `${wal} (${verdict(wal === 0)})`;
      return (
        `| ${r.dialect} | ${cells(lose.guard)} | ${cells(lose.select)} | ${ratio(lose.ratio)} | ${verdict(lose.ratio <= 1.3)} | ${walCell} | ` +
        `${us(lose.rowRead.guard.p50)} / ${us(lose.rowRead.read.p50)} | ${ratio(lose.rowRead.ratio)} | ` +
        `${us(lose.beforeControls.guard.p50)} / ${us(lose.beforeControls.old.p50)} | ${ratio(lose.beforeControls.ratio)} |`
      );
    }),
    '',
    ...referenceLines(results.map(({ dialect, figures }) => ({ dialect, reference: figures.reference }))),
    ...contentionLines([...results, ...withoutProcedure], contentionSize),
    '## 6. Library overhead: `guard.run` against the same SQL text sent straight through the driver',
    '',
    "The win path's statements, captured from the guard and replayed through the pool (better-sqlite3: prepared once). Target ≤ 1.15×.",
    '',
    '| dialect | guard p50 / p99 | direct p50 / p99 | ratio | target |',
    '| --- | --- | --- | --- | --- |',
    ...results.map(
      (r) =>
        `| ${r.dialect} | ${cells(r.figures.overhead.guard)} | ${cells(r.figures.overhead.direct)} | ${ratio(r.figures.overhead.ratio)} | ${verdict(r.figures.overhead.ratio <= 1.15)} |`,
    ),
    '',
    '## 7. Tick-to-start latency',
    '',
    ...(ticks === undefined ? ['Not measured.', ''] : tickLatencyLines(ticks, mode)),
    ...(ticks === undefined
      ? []
      : [
          "Where the time goes, in the same run: each step of cronguard's fires (`test/bench/fire-timeline.ts`; `--only timeline` measures it alone, on every dialect).",
          '',
          ...timelineTableLines(ticks),
        ]),
    ...(ticksByDialect.length === 0
      ? []
      : [
          'cronguard alone on every dialect, 10 jobs on `* * * * * *` × 3 slots, 3 replicas (no peer runs on SQLite or MySQL):',
          '',
          '| dialect | pairs started | duplicates | missed | p50 | p99 |',
          '| --- | --- | --- | --- | --- | --- |',
          ...ticksByDialect.map(({ dialect, figure }) => {
            const s = figure.systems[0];
            return s === undefined
              ? `| ${dialect} | - | - | - | - | - |`
              : `| ${dialect} | ${s.started} / ${s.jobSlots} | ${s.duplicates} | ${s.missed} | ${s.latencyMs.p50.toFixed(1)} ms | ${s.latencyMs.p99.toFixed(1)} ms |`;
          }),
          '',
        ]),
    '## 8. Memory',
    '',
    ...memoryLines(),
    '## 9. Capacity of one server',
    '',
    ...capacityLines(results),
    '## 10. A page of history on PostgreSQL',
    '',
    ...historyPageLines(history, verdict),
    '## 11. Tick-to-start latency as the jobs of one tick grow',
    '',
    ...(scale === undefined ? ['Not measured.', ''] : tickScaleLines(scale)),
    '## 12. The dashboard on a big history',
    '',
    ...dashboardLines(dashboards, verdict),
    ...missesLines({
      results,
      memoryGrowthMb: memory === undefined ? undefined : memoryGrowthMb(memory.pinned),
      contentionSlots: contentionSize[3],
      tickRatios: results.map((r) => ({
        dialect: r.dialect,
        ratio: r.tickContention.decisionsPerSecond / r.contention.decisionsPerSecond,
      })),
      scale,
    }),
  ];
  return lines.join('\n');
}

/** RSS after `runs` executions in a memory figure. */
function rssAt(figure: MemoryFigure, runs: number): number {
  return figure.readings.find((reading) => reading.runs === runs)?.rssMb ?? Number.NaN;
}

/** The growth the target is about: RSS after `large` runs less RSS after `small`. */
function memoryGrowthMb(figure: MemoryFigure): number {
  return rssAt(figure, memoryCounts.large) - rssAt(figure, memoryCounts.small);
}

function memoryLines(): string[] {
  if (memory === undefined) return ['Not measured.', ''];
  const { small, large, warm, longer } = memoryCounts;
  const { pinned, adaptive } = memory;
  const mb = (value: number): string => `${value.toFixed(1)} MB`;
  const growth = memoryGrowthMb(pinned);
  const lines = [
    "In a fresh process on the built package (`test/bench/memory-child.mjs`), RSS read after two collections 200 ms apart, with V8's " +
      'young generation fixed at its default maximum (`--min-semi-space-size=16 --max-semi-space-size=16`; see below).',
    '',
    '| executions | RSS |',
    '| --- | --- |',
    ...pinned.readings.map((reading) => `| ${reading.runs.toLocaleString('en-US')} | ${mb(reading.rssMb)} |`),
    '',
    `Growth from ${small.toLocaleString('en-US')} to ${large.toLocaleString('en-US')} executions: ${mb(growth)}. Target < 5 MB: ${verdict(growth < 5)}.`,
  ];
  if (warm !== undefined && longer !== undefined) {
    lines.push(
      `From ${warm.toLocaleString('en-US')} to ${longer.toLocaleString('en-US')} executions: ${mb(rssAt(pinned, longer) - rssAt(pinned, warm))} ` +
        "(whether RSS levels off once the process is warm: JIT-compiled code, SQLite's 2 MB page cache filling as the history grows).",
    );
  }
  lines.push(
    '',
    `With V8's adaptive sizing instead, the same ${small.toLocaleString('en-US')} → ${large.toLocaleString('en-US')} executions grow ` +
      `${mb(rssAt(adaptive, large) - rssAt(adaptive, small))} (${mb(rssAt(adaptive, small))} → ${mb(rssAt(adaptive, large))}): the young generation starts ` +
      'small and doubles up to that same cap (+16 MB) some thousands of executions after the first reading, then stays there; any Node ' +
      'program allocating at this rate shows it. The heap in use stays at about 13 MB throughout.',
    '',
  );
  return lines;
}
