import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import { describeValue } from '../core/errors.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { parseDuration, type DurationInput } from '../core/duration.js';
import { validateJobName } from '../core/job-options.js';
import { RUN_STATUSES, runRecordColumns, toRunRecord, type RunRecord, type RunRow, type RunStatus, toDate } from './run-record.js';
import { TickBatcher } from '../core/tick-batch.js';

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

/** The newest run of a job with a slot before a given one: what the slot ledger's live side compares with. */
export interface PreviousRun {
  readonly slot: Date;
  readonly status: string;
  readonly startedAt: Date;
  readonly finishedAt: Date | null;
  readonly lockUntil: Date | null;
}

interface PreviousRunQuestion {
  readonly job: string;
  readonly before: Date;
}

interface PreviousRunRow {
  i: number | string;
  slot: Date | string;
  status: string;
  started_at: Date | string;
  finished_at: Date | string | null;
  lock_until: Date | string | null;
}

/**
 * Reads, for a job just won, the newest run before its slot (SlotWatch's gap check). The wins of
 * one tick ask in the same turn of the event loop, and their questions go as one statement
 * (core/tick-batch.ts): one read per tick, not one per job won.
 */
export class PreviousRunReader {
  readonly #db: Kysely<unknown>;
  readonly #dialect: Dialect;
  readonly #runs: RawBuilder<unknown>;
  readonly #batcher: TickBatcher<PreviousRunQuestion, PreviousRun | null>;

  constructor(db: Kysely<unknown>, dialect: Dialect, runs: RawBuilder<unknown>) {
    this.#db = db;
    this.#dialect = dialect;
    this.#runs = runs;
    this.#batcher = new TickBatcher({
      one: async (question) => (await this.#read([question]))[0] ?? null,
      many: (questions) => this.#read(questions),
      afterFailure: 'alone',
    });
  }

  /** The newest run of `job` with a slot before `before` (skipped rows aside), or null for a job's first. */
  previousRun(job: string, before: Date): Promise<PreviousRun | null> {
    return this.#batcher.send({ job, before }, job);
  }

  /**
   * One statement for all the questions: per job the one-row read of the (job_name, slot) index,
   * newest first, as a derived table (the form every dialect accepts with its own ORDER BY and
   * LIMIT), numbered and joined by UNION ALL. A job with no earlier run has no row.
   */
  async #read(questions: readonly PreviousRunQuestion[]): Promise<(PreviousRun | null)[]> {
    const { reads } = this.#dialect;
    const columns = sql.raw(
      [
        `${reads.time('slot')} AS slot`,
        'status',
        `${reads.time('started_at')} AS started_at`,
        `${reads.time('finished_at')} AS finished_at`,
        `${reads.time('lock_until')} AS lock_until`,
      ].join(', '),
    );
    const parts = questions.map(
      ({ job, before }, index) => sql`SELECT ${sql.lit(index)} AS i, q.* FROM (
        SELECT ${columns} FROM ${this.#runs}
         WHERE job_name = ${job} AND slot < ${reads.timeParameter(before)} AND status <> 'skipped'
         ORDER BY slot DESC LIMIT 1) q`,
    );
    const { rows } = await sql<PreviousRunRow>`${sql.join(parts, sql` UNION ALL `)}`.execute(this.#db);
    const answers: (PreviousRun | null)[] = questions.map(() => null);
    for (const row of rows) {
      answers[Number(row.i)] = {
        slot: toDate(row.slot),
        status: row.status,
        startedAt: toDate(row.started_at),
        finishedAt: row.finished_at === null ? null : toDate(row.finished_at),
        lockUntil: row.lock_until === null ? null : toDate(row.lock_until),
      };
    }
    return answers;
  }
}

/** Rows deleted by one statement: short enough not to hold locks for long. */
export const PRUNE_BATCH_SIZE = 1_000;

/**
 * Deletes runs that started before `cutoff`, in batches of at most PRUNE_BATCH_SIZE, up to
 * `maxBatches` of them. Keeps the newest run of each job (so that "when did it last run" always has
 * an answer) and every `running` row (doctor reports those). Returns how many rows went.
 */
export function createPruner(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const runs = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  return async function prune(cutoff: Date, maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    const before = dialect.reads.timeParameter(cutoff);
    let deleted = 0;
    for (let batch = 0; batch < maxBatches; batch += 1) {
      // "Newer" orders like the history (started_at, then id), so that runs started in the same
      // millisecond still leave exactly one newest. A skip (recordSkips) is never the newer run
      // that lets a real one go: losers write theirs just after the winner starts, and the job's
      // newest real run must stay.
      // The ids are chosen in a derived table: MySQL refuses a DELETE whose subquery reads the
      // table it deletes from, and a LIMIT inside IN (…), unless the subquery is materialised.
      const result = await sql`DELETE FROM ${runs} WHERE id IN (
        SELECT id FROM (
          SELECT r.id FROM ${runs} r
           WHERE r.started_at < ${before} AND r.status <> 'running'
             AND EXISTS (SELECT 1 FROM ${runs} n WHERE n.job_name = r.job_name
                           AND (n.status <> 'skipped' OR r.status = 'skipped')
                           AND (n.started_at > r.started_at OR (n.started_at = r.started_at AND n.id > r.id)))
           LIMIT ${PRUNE_BATCH_SIZE}
        ) batch
      )`.execute(db);
      const count = Number(result.numAffectedRows ?? 0n);
      deleted += count;
      if (count < PRUNE_BATCH_SIZE) break;
    }
    return deleted;
  };
}
