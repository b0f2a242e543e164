import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Dialect } from '../core/dialect.js';
import { TickBatcher } from '../core/tick-batch.js';
import { toDate } from './run-record.js';

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
