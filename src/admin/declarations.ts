import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import type { Declaration } from '../core/slot-walk.js';
import { toDate } from './run-record.js';

/** At most this many jobs per statement: 3 bound values each, far below every server's limit. */
const ROWS_PER_STATEMENT = 500;
/** The most declarations one ledger read takes per job: the newest (a process start each). */
export const MAX_DECLARATIONS_READ = 1_000;
/** The most declarations the dashboard reads per job of a page: its newest, by start. */
export const DASHBOARD_DECLARATIONS_PER_JOB = 20;
/** Declarations older than this are deleted when a process stops: no ledger read looks that far. */
export const DECLARATIONS_KEPT_MS = 31 * 24 * 3_600_000;

interface DeclarationRow {
  started_at: Date | string;
  declared_at: Date | string;
  stopped_at: Date | string | null;
}

function chunks<T>(items: readonly T[]): T[][] {
  const sorted = [...new Set(items)].sort() as T[];
  const result: T[][] = [];
  for (let from = 0; from < sorted.length; from += ROWS_PER_STATEMENT) result.push(sorted.slice(from, from + ROWS_PER_STATEMENT));
  return result;
}

/**
 * `<prefix>declarations` (migration 007): which guard process declares which job, and its clean
 * stop. Written when a job is declared (at start, hourly) and once at shutdown; read by the ledger.
 * Not a hot path. A table missing (tables before 007) is the caller's to tolerate.
 */
export function createDeclarationStore(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const declarations = sql.raw(quotedTable(tables, 'declarations', dialect.quote));
  const reads = dialect.reads;
  const now = sql.raw(reads.now);
  /** A read's rows; none when the declarations table does not exist yet (tables before migration 007). */
  async function rowsOrNone<R>(read: RawBuilder<R>): Promise<R[]> {
    try {
      return (await read.execute(db)).rows;
    } catch (error) {
      if (dialect.isMissingTable(error)) return [];
      throw error;
    }
  }

  return {
    /**
     * This process declares these jobs, on the database's clock: a new row at its first
     * declaration (`started_at`), `declared_at` moved after. One statement per 500 jobs, in name
     * order (replicas declaring together lock rows in the same order); `stopped_at` cleared, as a
     * guard declares only while it runs.
     */
    async declare(jobs: readonly string[], instanceId: string, lockedBy: string): Promise<void> {
      for (const batch of chunks(jobs)) {
        const values = sql.join(batch.map((job) => sql`(${job}, ${instanceId}, ${lockedBy}, ${now}, ${now}, NULL)`));
        const insert = sql`INSERT INTO ${declarations} (job_name, instance_id, locked_by, started_at, declared_at, stopped_at) VALUES ${values}`;
        const upsert =
          dialect.name === 'mysql'
            ? sql`${insert} ON DUPLICATE KEY UPDATE declared_at = VALUES(declared_at), stopped_at = NULL`
            : sql`${insert} ON CONFLICT (job_name, instance_id) DO UPDATE SET declared_at = excluded.declared_at, stopped_at = NULL`;
        await upsert.execute(db);
      }
    },
    /**
     * This process stopped scheduling these jobs (its shutdown): `stopped_at` on its rows, by
     * primary key. Then its jobs' rows older than DECLARATIONS_KEPT_MS go (one process start each
     * adds a row: this keeps the table to a month of starts).
     *
     * `stoppedMsAgo`: the stop is when the process stopped starting runs, which came before this
     * statement by the drain of its runs in flight; back-dated on the database's clock so that the
     * slots of a slow shutdown are not counted as missed.
     */
    async stop(jobs: readonly string[], instanceId: string, stoppedMsAgo: number): Promise<void> {
      const stoppedAt = reads.nowMinus(Math.max(stoppedMsAgo, 0));
      for (const batch of chunks(jobs)) {
        const names = sql.join(batch);
        await sql`UPDATE ${declarations} SET stopped_at = ${stoppedAt}, declared_at = ${now}
          WHERE job_name IN (${names}) AND instance_id = ${instanceId}`.execute(db);
        const cutoff = reads.timeParameter(new Date(Date.now() - DECLARATIONS_KEPT_MS));
        await sql`DELETE FROM ${declarations} WHERE job_name IN (${names}) AND declared_at < ${cutoff}`.execute(db);
      }
    },
    /**
     * One job's declarations, the newest MAX_DECLARATIONS_READ by start (its primary key's prefix);
     * none on tables before migration 007 (no declarations table).
     */
    async of(job: string): Promise<Declaration[]> {
      const rows = await rowsOrNone(sql<DeclarationRow>`SELECT ${sql.raw(reads.time('started_at'))} AS started_at,
          ${sql.raw(reads.time('declared_at'))} AS declared_at, ${sql.raw(reads.time('stopped_at'))} AS stopped_at
        FROM ${declarations} WHERE job_name = ${job} ORDER BY started_at DESC LIMIT ${MAX_DECLARATIONS_READ}`);
      return rows.map(toDeclaration);
    },
    /**
     * The declarations of a page of jobs (the dashboard's, at most 50) in one statement: per job its
     * newest DASHBOARD_DECLARATIONS_PER_JOB by start (its latest clean stop, and the starts and stops
     * before it), a UNION ALL of one derived table per job, each a read of the primary key's prefix
     * (job_name). Bounded: at most 20 rows per job come back, whatever the table holds. A stop
     * older than the newest 20 starts of its job is not seen: its slots stay expected (never hidden).
     * None on tables before migration 007.
     */
    async ofJobs(jobs: readonly string[]): Promise<Map<string, Declaration[]>> {
      const byJob = new Map<string, Declaration[]>();
      if (jobs.length === 0) return byJob;
      const parts = [...new Set(jobs)].map(
        (
          job,
          index,
        ) => sql`SELECT * FROM (SELECT ${sql.raw(reads.name('job_name'))} AS job_name, ${sql.raw(reads.time('started_at'))} AS started_at,
            ${sql.raw(reads.time('declared_at'))} AS declared_at, ${sql.raw(reads.time('stopped_at'))} AS stopped_at
          FROM ${declarations} WHERE job_name = ${job} ORDER BY started_at DESC LIMIT ${DASHBOARD_DECLARATIONS_PER_JOB}) ${sql.raw(`d${index}`)}`,
      );
      const rows = await rowsOrNone(sql<DeclarationRow & { job_name: string }>`${sql.join(parts, sql` UNION ALL `)}`);
      for (const row of rows) {
        const list = byJob.get(row.job_name) ?? [];
        list.push(toDeclaration(row));
        byJob.set(row.job_name, list);
      }
      return byJob;
    },
  };
}

function toDeclaration(row: DeclarationRow): Declaration {
  return {
    startedAt: toDate(row.started_at),
    declaredAt: toDate(row.declared_at),
    stoppedAt: row.stopped_at === null ? null : toDate(row.stopped_at),
  };
}

export type DeclarationStore = ReturnType<typeof createDeclarationStore>;
