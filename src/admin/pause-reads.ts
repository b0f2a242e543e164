import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { pauseIntervals, type PauseInterval } from '../core/slot-ledger.js';
import { toDate } from './run-record.js';

/** The most pause changes one ledger read takes into account: the newest before the range's end. */
export const MAX_PAUSE_CHANGES = 1_000;

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
  const { rows } = await sql<{ action: string; pause_until: Date | string | null; changed_at: Date | string }>`
    SELECT action, ${sql.raw(reads.time('pause_until'))} AS pause_until, ${sql.raw(reads.time('changed_at'))} AS changed_at
      FROM ${controls}
     WHERE job_name = ${job} AND action IN ('pause', 'auto-pause', 'resume') AND changed_at < ${reads.timeParameter(to)}
     ORDER BY changed_at DESC, id DESC LIMIT ${MAX_PAUSE_CHANGES}`.execute(db);
  const changes = rows.reverse().map((row) => ({
    action: row.action,
    until: row.pause_until === null ? null : toDate(row.pause_until),
    at: toDate(row.changed_at),
  }));
  return pauseIntervals(changes).filter((pause) => pause.from < to && (pause.until === null || pause.until > from));
}
