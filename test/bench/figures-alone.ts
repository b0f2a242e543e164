// `npm run bench -- --only scale|ticks|contention|dashboard|reference`: one figure alone, on databases of its own, its table
// printed (no file written), to look into one figure without the whole bench's ten minutes.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGuard, type DialectName } from '../../src/index.js';
import { findMariadbd, startMariadb, startPostgres } from '../setup/databases.js';
import { contention, contentionLines, mysqlWithoutProcedure } from './contention.js';
import { dashboardFigure, dashboardLines } from './dashboard-reads.js';
import { againstReference, referenceLines } from './figures.js';
import { fireTimelineOn, type TimelineSize } from './fire-timeline.js';
import { openDriver } from './drivers.js';
import { tickLatency, tickLatencyLines, type TickSize } from './tick-latency.js';
import { tickScale, tickScaleLines, type TickScaleSize } from './tick-scale.js';

/** Figure 11 on the dialects named (all by default). */
export async function tickScaleAlone(size: TickScaleSize, dialects: readonly string[] | undefined): Promise<void> {
  await withDatabases(dialects, async (targets) => {
    console.log(tickScaleLines(await tickScale(targets, size)).join('\n'));
  });
}

/** Figure 5 (one job at a time beside a tick at a time) on the dialects named (all by default). */
export async function contentionAlone(
  size: readonly [number, number, number, number],
  dialects: readonly string[] | undefined,
): Promise<void> {
  await withDatabases(dialects, async (targets) => {
    const results = [];
    for (const [dialect, url] of targets) {
      const contentionFigure = await contention(url, ...size);
      results.push({ dialect, contention: contentionFigure, tickContention: await contention(url, ...size, true) });
      if (dialect === 'mysql') results.push(...(await mysqlWithoutProcedure(url, size)));
    }
    console.log(contentionLines(results, size).join('\n'));
  });
}

/** The fire timeline (fire-timeline.ts) on the dialects named (all by default). */
export async function fireTimelineAlone(size: TimelineSize, dialects: readonly string[] | undefined): Promise<void> {
  await withDatabases(dialects, (targets) => fireTimelineOn(targets, size));
}

/** Figure 12 (the dashboard on a big history) on the dialects named (all by default). */
export async function dashboardAlone(
  size: { runs: number; jobs: number; moreJobs: number; iterations: number },
  dialects: readonly string[] | undefined,
): Promise<void> {
  await withDatabases(dialects, async (targets) => {
    const figures = [];
    for (const [dialect, url] of targets) {
      console.error(`cronguard bench: the dashboard on ${dialect} at ${size.runs.toLocaleString('en-US')} runs…`);
      figures.push(await dashboardFigure(dialect, url, size));
    }
    console.log(dashboardLines(figures, (met) => (met ? 'met' : '**not met**')).join('\n'));
  });
}

/** Starts the databases of the dialects named (all by default), each its own, for `measure`. */
async function withDatabases(
  dialects: readonly string[] | undefined,
  measure: (targets: readonly [DialectName, string][]) => Promise<void>,
): Promise<void> {
  const wanted = (dialect: DialectName): boolean => dialects === undefined || dialects.includes(dialect);
  const sqliteDir = mkdtempSync(join(tmpdir(), 'cronguard-bench-alone-'));
  const postgres = wanted('postgres') ? await startPostgres() : undefined;
  const mariadb = wanted('mysql') && findMariadbd() !== undefined ? await startMariadb() : undefined;
  try {
    await measure([
      ...(wanted('sqlite') ? [['sqlite', `sqlite:${join(sqliteDir, 'bench.sqlite')}`] as [DialectName, string]] : []),
      ...(postgres === undefined ? [] : [['postgres', postgres.url] as [DialectName, string]]),
      ...(mariadb === undefined ? [] : [['mysql', mariadb.url] as [DialectName, string]]),
    ]);
  } finally {
    await Promise.all([postgres?.stop(), mariadb?.stop()]);
  }
}

/** Figure 4 (the win and the loss against ShedLock's algorithm) on the dialects named (all by default). */
export async function referenceAlone(iterations: number, dialects: readonly string[] | undefined): Promise<void> {
  await withDatabases(dialects, async (targets) => {
    const results = [];
    for (const [dialect, url] of targets) {
      console.error(`cronguard bench: figure 4 on ${dialect}, ${iterations} iterations per series…`);
      const driver = openDriver(dialect, url);
      const quiet = { warn: () => undefined, error: () => undefined };
      const guard = createGuard({ database: driver.guardDatabase, tablePrefix: 'bench_', logger: quiet, telemetry: false });
      const holder = createGuard({ database: driver.guardDatabase, tablePrefix: 'bench_', logger: quiet, telemetry: false });
      try {
        await guard.migrate();
        // The loser's lock, held by another guard on the same tables, as in the whole bench.
        await holder.run({ name: 'held', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, () => undefined);
        results.push({ dialect, reference: await againstReference(driver, guard, iterations) });
      } finally {
        await holder.close();
        await guard.close();
        await driver.close();
      }
    }
    console.log(referenceLines(results).join('\n'));
  });
}

/** Figure 7 (cronguard beside pg-boss and graphile-worker) on a PostgreSQL of its own. */
export async function tickLatencyAlone(size: TickSize, mode: string): Promise<void> {
  const postgres = await startPostgres();
  try {
    console.log(tickLatencyLines(await tickLatency(postgres.url, size), mode).join('\n'));
  } finally {
    await postgres.stop();
  }
}
