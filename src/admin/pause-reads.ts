import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { pauseIntervals, type PauseChangeRecord, type PauseInterval } from '../core/slot-ledger.js';
import { toDate } from './run-record.js';

/** The most pause changes one ledger read takes into account: the newest before the range's end. */
export const MAX_PAUSE_CHANGES = 1_000;

/** A pause change as the controls table gives it back. */
interface PauseChangeRow {
  action: string;
  pause_until: Date | string | null;
  changed_at: Date | string;
}

function toPauseChange(row: PauseChangeRow): PauseChangeRecord {
  return { action: row.action, until: row.pause_until === null ? null : toDate(row.pause_until), at: toDate(row.changed_at) };
}

/** The intervals that overlap [from, to). */
function overlapping(intervals: PauseInterval[], from: Date, to: Date): PauseInterval[] {
  return intervals.filter((pause) => pause.from < to && (pause.until === null || pause.until > from));
}

/**
 * The job's pause intervals that overlap [from, to), from the controls audit (the lock row keeps
 * only the pause in force; the audit keeps every one). One read on the (job_name, changed_at)
 * index, newest first and bounded, so a job paused and resumed all day costs at most
 * MAX_PAUSE_CHANGES rows; the newest change at or before `from` is among them whenever the range
 * holds fewer changes, which tells whether the range starts paused.
 */
export async function readPauseIntervals(
  db: Kysely<unknown>,
  dialect: Dialect,
  tables: TableNames,
  job: string,
  from: Date,
  to: Date,
): Promise<PauseInterval[]> {
  const controls = sql.raw(quotedTable(tables, 'controls', dialect.quote));
  const reads = dialect.reads;
  const { rows } = await sql<PauseChangeRow>`
    SELECT action, ${sql.raw(reads.time('pause_until'))} AS pause_until, ${sql.raw(reads.time('changed_at'))} AS changed_at
      FROM ${controls}
     WHERE job_name = ${job} AND action IN ('pause', 'auto-pause', 'resume') AND changed_at < ${reads.timeParameter(to)}
     ORDER BY changed_at DESC, id DESC LIMIT ${MAX_PAUSE_CHANGES}`.execute(db);
  return overlapping(pauseIntervals(rows.reverse().map(toPauseChange)), from, to);
}

/** One job's range whose pauses a read of several jobs asks for. */
export interface PauseRange {
  readonly job: string;
  readonly from: Date;
  readonly to: Date;
}

/**
 * The pause intervals of several jobs, each overlapping its [from, to), in one statement whatever
 * the number of jobs (the dashboard's overview; `readPauseIntervals` reads one job). Per job, the
 * changes in its range and the newest change before it (which tells whether the range starts
 * paused), each an index read on (job_name, changed_at); newest first, at most MAX_PAUSE_CHANGES
 * per job in all, so a flood of changes costs the oldest of them, never an unbounded read.
 */
export async function readPauseIntervalsOfJobs(
  db: Kysely<unknown>,
  dialect: Dialect,
  tables: TableNames,
  ranges: readonly PauseRange[],
): Promise<Map<string, PauseInterval[]>> {
  const intervals = new Map<string, PauseInterval[]>();
  if (ranges.length === 0) return intervals;
  const controls = sql.raw(quotedTable(tables, 'controls', dialect.quote));
  const reads = dialect.reads;
  const pauseActions = sql.raw(`action IN ('pause', 'auto-pause', 'resume')`);
  // Per job an OR term: its range on the (job_name, changed_at) index, or the id of its newest
  // change before the range (a scalar subquery with LIMIT 1, which MySQL allows where it refuses
  // `IN (SELECT … LIMIT)`). Every value bound as a parameter.
  const terms = ranges.map(({ job, from, to }) => {
    const start = reads.timeParameter(from);
    return sql`(job_name = ${job} AND changed_at >= ${start} AND changed_at < ${reads.timeParameter(to)})
      OR id = (SELECT id FROM ${controls} WHERE job_name = ${job} AND ${pauseActions} AND changed_at < ${start}
               ORDER BY changed_at DESC, id DESC LIMIT 1)`;
  });
  const { rows } = await sql<PauseChangeRow & { job: string }>`
    SELECT ${sql.raw(reads.name('job_name'))} AS job, action, ${sql.raw(reads.time('pause_until'))} AS pause_until,
           ${sql.raw(reads.time('changed_at'))} AS changed_at
      FROM ${controls}
     WHERE ${pauseActions} AND (${sql.join(terms as RawBuilder<unknown>[], sql` OR `)})
     ORDER BY changed_at DESC, id DESC LIMIT ${MAX_PAUSE_CHANGES * ranges.length}`.execute(db);
  const changesByJob = new Map<string, PauseChangeRecord[]>();
  for (const row of rows.reverse()) {
    const changes = changesByJob.get(row.job);
    if (changes === undefined) changesByJob.set(row.job, [toPauseChange(row)]);
    else changes.push(toPauseChange(row));
  }
  for (const { job, from, to } of ranges) intervals.set(job, overlapping(pauseIntervals(changesByJob.get(job) ?? []), from, to));
  return intervals;
}
