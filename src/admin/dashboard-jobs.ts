import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';

/**
 * The most jobs one dashboard read takes: a page of the overview. Every per-job read of the
 * overview binds at most this many names, so that no statement grows with the number of jobs.
 */
export const DASHBOARD_PAGE_JOBS = 50;

/** Which job names a page of the overview lists, in the database's name order. */
export interface JobNamesQuery {
  /** Only names after this one (the last name of the previous page). @default from the first */
  readonly after?: string | undefined;
  /** Only names containing this text (case as the column compares it). @default every name */
  readonly contains?: string | undefined;
  /** At most this many names (1 to DASHBOARD_PAGE_JOBS + 1). */
  readonly limit: number;
}

/**
 * The dashboard's list of jobs: every lock row and every declared schedule (a job that ever ran
 * has a lock row: its first run inserted it), a page at a time. Never the runs table, whose size
 * is the history's.
 */
export function createJobListReader(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  const jobs = sql.raw(quotedTable(tables, 'jobs', dialect.quote));
  const reads = dialect.reads;
  // A substring test that no value can turn into a pattern (LIKE would read % and _): each
  // dialect's own position function, the text bound as a parameter.
  const contains = (text: string): RawBuilder<unknown> =>
    dialect.name === 'postgres'
      ? sql`strpos(name, ${text}) > 0`
      : dialect.name === 'mysql'
        ? sql`LOCATE(${text}, name) > 0`
        : sql`instr(name, ${text}) > 0`;

  return async function jobNames(query: JobNamesQuery): Promise<string[]> {
    const limit = Math.min(Math.max(Math.trunc(query.limit), 1), DASHBOARD_PAGE_JOBS + 1);
    const conditions: RawBuilder<unknown>[] = [];
    if (query.after !== undefined) conditions.push(sql`name > ${query.after}`);
    if (query.contains !== undefined && query.contains !== '') conditions.push(contains(query.contains));
    const where = conditions.length === 0 ? sql`` : sql`WHERE ${sql.join(conditions, sql` AND `)}`;
    // Each table read on its primary key in name order and stopped after `limit` names (an
    // index-only range from `after`), then the two short lists merged: the page costs about
    // 2 × limit index entries whatever the number of jobs (a `contains` filter reads names until
    // it has found `limit`). Each side a derived table, so that its ORDER BY … LIMIT is its own
    // on every dialect; the outer ORDER BY names the derived column (on MySQL the select list's
    // alias is the converted text, whose order need not be the column's binary order).
    const side = (table: RawBuilder<unknown>, alias: string) =>
      sql`SELECT * FROM (SELECT name FROM ${table} ${where} ORDER BY name LIMIT ${limit}) AS ${sql.raw(alias)}`;
    const { rows } = await sql<{ job: string }>`SELECT ${sql.raw(reads.name('names.name'))} AS job
      FROM (${side(locks, 'from_locks')} UNION ${side(jobs, 'from_jobs')}) AS names ORDER BY names.name LIMIT ${limit}`.execute(db);
    return rows.map((row) => row.job);
  };
}
