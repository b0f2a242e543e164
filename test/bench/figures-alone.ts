// `npm run bench -- --only scale|ticks`: one figure alone, on databases of its own, its table
// printed (no file written), to look into one figure without the whole bench's ten minutes.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DialectName } from '../../src/index.js';
import { findMariadbd, startMariadb, startPostgres } from '../setup/databases.js';
import { tickLatency, tickLatencyLines, type TickSize } from './tick-latency.js';
import { tickScale, tickScaleLines, type TickScaleSize } from './tick-scale.js';

/** Figure 11 on the dialects named (all by default). */
export async function tickScaleAlone(size: TickScaleSize, dialects: readonly string[] | undefined): Promise<void> {
  const wanted = (dialect: DialectName): boolean => dialects === undefined || dialects.includes(dialect);
  const sqliteDir = mkdtempSync(join(tmpdir(), 'cronguard-bench-scale-'));
  const postgres = wanted('postgres') ? await startPostgres() : undefined;
  const mariadb = wanted('mysql') && findMariadbd() !== undefined ? await startMariadb() : undefined;
  try {
    const targets: [DialectName, string][] = [
      ...(wanted('sqlite') ? [['sqlite', `sqlite:${join(sqliteDir, 'scale.sqlite')}`] as [DialectName, string]] : []),
      ...(postgres === undefined ? [] : [['postgres', postgres.url] as [DialectName, string]]),
      ...(mariadb === undefined ? [] : [['mysql', mariadb.url] as [DialectName, string]]),
    ];
    console.log(tickScaleLines(await tickScale(targets, size)).join('\n'));
  } finally {
    await Promise.all([postgres?.stop(), mariadb?.stop()]);
  }
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
