import type { ReadSql } from '../core/dialect.js';

/**
 * Where a run stands. `cancelled`: the job stopped because its signal aborted (shutdown, deadline,
 * lock lost), rejecting with the signal's reason; not a failure. `abandoned`: its lock expired while
 * it was `running` and another execution took over (its process died, or it overran and may still
 * finish). `skipped`: recorded only with `recordSkips`.
 */
export type RunStatus = 'running' | 'succeeded' | 'failed' | 'cancelled' | 'abandoned' | 'skipped';

export const RUN_STATUSES: readonly RunStatus[] = ['running', 'succeeded', 'failed', 'cancelled', 'abandoned', 'skipped'];

/** One row of `<prefix>runs`. Times are UTC instants from the database's clock. */
export interface RunRecord {
  /** The execution's token. */
  readonly id: string;
  readonly job: string;
  /** The nominal scheduled time, when the caller gave one. */
  readonly slot: Date | null;
  readonly status: RunStatus;
  readonly lockedBy: string;
  readonly startedAt: Date;
  readonly finishedAt: Date | null;
  readonly durationMs: number | null;
  readonly lockAtMostForMs: number | null;
  /** When the run's lock expired or expires. */
  readonly lockUntil: Date | null;
  /** The run finished after its lock had expired: another execution may have overlapped it. */
  readonly overran: boolean;
  /**
   * The job's error message (for a `cancelled` run, why its signal aborted), cut to 4,096
   * characters, NUL and lone surrogates replaced by U+FFFD.
   */
  readonly error: string | null;
  /** Who asked for this run by hand (`guard.trigger`, `cronguard trigger`); null for a run its schedule or a call started. */
  readonly triggeredBy: string | null;
}

/** A row of `<prefix>runs` as the drivers return it, with the columns aliased as below. */
export interface RunRow {
  id: string;
  job: string;
  slot: Date | string | null;
  status: RunStatus;
  locked_by: string;
  started_at: Date | string;
  finished_at: Date | string | null;
  duration_ms: number | string | null;
  lock_at_most_for_ms: number | string | null;
  lock_until: Date | string | null;
  overran: boolean | number;
  error: string | null;
  triggered_by: string | null;
}

/**
 * The runs table's columns as a `RunRow`: under the aliases `toRunRecord` reads, times and names as
 * the dialect reads them back. Every read of runs as records (history, doctor, the dashboard)
 * selects these, so that a column added here reaches them all. `triggeredBy: false` for tables
 * before migration 004, which have no triggered_by column (no run was triggered then).
 */
export function runRecordColumns(reads: ReadSql, { triggeredBy }: { triggeredBy: boolean }): string {
  return [
    'id',
    `${reads.name('job_name')} AS job`,
    `${reads.time('slot')} AS slot`,
    'status',
    'locked_by',
    `${reads.time('started_at')} AS started_at`,
    `${reads.time('finished_at')} AS finished_at`,
    'duration_ms',
    'lock_at_most_for_ms',
    `${reads.time('lock_until')} AS lock_until`,
    'overran',
    'error',
    triggeredBy ? 'triggered_by' : 'NULL AS triggered_by',
  ].join(', ');
}

export function toRunRecord(row: RunRow): RunRecord {
  return {
    id: row.id,
    job: row.job,
    slot: toDateOrNull(row.slot),
    status: row.status,
    lockedBy: row.locked_by,
    startedAt: toDate(row.started_at),
    finishedAt: toDateOrNull(row.finished_at),
    durationMs: toNumberOrNull(row.duration_ms),
    lockAtMostForMs: toNumberOrNull(row.lock_at_most_for_ms),
    lockUntil: toDateOrNull(row.lock_until),
    overran: Boolean(Number(row.overran)),
    error: row.error,
    triggeredBy: row.triggered_by ?? null,
  };
}

export function toDate(value: Date | string): Date {
  return value instanceof Date ? value : new Date(value);
}

function toDateOrNull(value: Date | string | null): Date | null {
  return value === null ? null : toDate(value);
}

function toNumberOrNull(value: number | string | null): number | null {
  return value === null ? null : Number(value);
}
