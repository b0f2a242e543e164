import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import { describeValue } from '../core/describe-value.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { parseDuration, type DurationInput } from '../core/duration.js';
import { validateJobName } from '../core/job-options.js';
import { RUN_STATUSES, runRecordColumns, toRunRecord, type RunRecord, type RunRow, type RunStatus } from './run-record.js';

/** Which runs `guard.history()` returns, newest first. */
export interface HistoryQuery {
  /** Only this job's runs. @default every job */
  job?: string;
  /** Only runs in this status. @default every status */
  status?: RunStatus;
  /** Only runs started at or after this time, or this long ago ('24h'). @default no bound */
  since?: Date | DurationInput;
  /** Only runs started before this time, or this long ago. @default no bound */
  until?: Date | DurationInput;
  /** At most this many runs (1 to 1,000). @default 50 */
  limit?: number;
  /** The `next` cursor of the previous page. @default the newest runs */
  before?: string;
}

/** A page of runs, newest first, and the cursor of the next page when there is one. */
export interface HistoryPage {
  readonly runs: RunRecord[];
  readonly next: string | undefined;
}

const MAX_LIMIT = 1_000;

/** Builds the history reader of one guard; the SQL is assembled per call (not a hot path). */
export function createHistoryReader(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const runs = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  const reads = dialect.reads;
  // Migration 004's column triggered_by; on tables before it, no run was triggered.
  const columnsOf = (controls: boolean) => sql.raw(runRecordColumns(reads, { triggeredBy: controls }));
  const columns = { controls: columnsOf(true), before: columnsOf(false) };

  /**
   * `withSkips: false` leaves out `skipped` rows (doctor: with recordSkips they would crowd out the
   * runs); `controls: false` for tables before migration 004.
   */
  return async function history(
    query: HistoryQuery = {},
    { withSkips = true, controls = true }: { withSkips?: boolean; controls?: boolean } = {},
  ): Promise<HistoryPage> {
    const limit = query.limit === undefined ? 50 : query.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      throw new TypeError(`Expected \`limit\` to be an integer from 1 to ${MAX_LIMIT}, got ${describeValue(limit)}`);
    }
    const conditions: RawBuilder<unknown>[] = [];
    if (query.job !== undefined) conditions.push(sql`job_name = ${validateJobName(query.job)}`);
    if (query.status !== undefined) {
      if (!RUN_STATUSES.includes(query.status)) {
        throw new TypeError(`Expected \`status\` to be one of ${RUN_STATUSES.join(', ')}, got ${describeValue(query.status)}`);
      }
      conditions.push(sql`status = ${query.status}`);
    }
    if (!withSkips) conditions.push(sql`status <> 'skipped'`);
    if (query.since !== undefined) conditions.push(sql`started_at >= ${reads.timeParameter(pointInTime(query.since, 'since'))}`);
    if (query.until !== undefined) conditions.push(sql`started_at < ${reads.timeParameter(pointInTime(query.until, 'until'))}`);
    if (query.before !== undefined) {
      const cursor = decodeCursor(query.before);
      const at = reads.timeParameter(cursor.startedAt);
      // Ties on started_at are broken by id, so that no run is shown twice or skipped.
      conditions.push(sql`(started_at < ${at} OR (started_at = ${at} AND id < ${cursor.id}))`);
    }
    const where = conditions.length === 0 ? sql`` : sql`WHERE ${sql.join(conditions, sql` AND `)}`;
    const { rows } = await sql<RunRow>`SELECT ${controls ? columns.controls : columns.before} FROM ${runs} ${where}
      ORDER BY started_at DESC, id DESC LIMIT ${limit + 1}`.execute(db);
    const page = rows.slice(0, limit).map(toRunRecord);
    const last = page.at(-1);
    return { runs: page, next: rows.length > limit && last !== undefined ? encodeCursor(last) : undefined };
  };
}

/** A Date, or a duration meaning that long before now. */
export function pointInTime(value: Date | DurationInput, option: string): Date {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError(`Expected \`${option}\` to be a valid Date, got ${describeValue(value)}`);
    return value;
  }
  return new Date(Date.now() - parseDuration(value, { option, job: undefined }));
}

function encodeCursor(run: RunRecord): string {
  return Buffer.from(JSON.stringify([run.startedAt.toISOString(), run.id])).toString('base64url');
}

function decodeCursor(cursor: string): { startedAt: Date; id: string } {
  try {
    const [startedAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof startedAt === 'string' && typeof id === 'string' && !Number.isNaN(Date.parse(startedAt))) {
      return { startedAt: new Date(startedAt), id };
    }
  } catch {
    // Reported below.
  }
  throw new TypeError(`Expected \`before\` to be the \`next\` cursor of a history page, got ${describeValue(cursor)}`);
}
