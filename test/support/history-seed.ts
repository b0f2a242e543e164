// A big history written straight into a guard's migrated tables, set-based (one INSERT … SELECT per
// table over generated numbers, never a row at a time): for the dashboard's plan tests (a modest
// table with statistics) and for the bench (a million rows). The tables' own columns, as the guard
// writes them; no user value reaches the SQL (every value is a number of this file).
import type { DialectName } from '../../src/index.js';
import type { RawDatabase } from './raw-database.js';

export interface HistorySize {
  /** Rows in the runs table: run i is of job i % jobs, started i seconds before now (whole seconds), its slot that second. */
  readonly runs: number;
  /** Jobs, each with a lock row (free): named job-00000, job-00001, … (name order is number order). */
  readonly jobs: number;
  /** Per job index, the cron expression of its declared schedule (declared two days ago), or undefined for none. */
  readonly schedule?: (job: number) => string | undefined;
  /**
   * Rows in the declarations table (migration 007): declaration i is of job i % jobs, a process
   * that started i minutes before now and stopped cleanly 30 s later. @default 0
   */
  readonly declarations?: number;
}

/** The name of the seeded job with this index. */
export function seededJob(index: number): string {
  return `job-${String(index).padStart(5, '0')}`;
}

/** `SELECT i` for i from 0 to count − 1: generate_series on PostgreSQL, a cross join of digits elsewhere (MySQL 8 stops a recursive CTE at 1,000). */
function numbers(dialect: DialectName, count: number): string {
  if (dialect === 'postgres') return `SELECT i FROM generate_series(0, ${count - 1}) AS g(i)`;
  const digits = Math.max(1, Math.ceil(Math.log10(count)));
  const digit =
    '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
  const tables = Array.from({ length: digits }, (_, k) => `${digit} AS d${k}`).join(' CROSS JOIN ');
  const sum = Array.from({ length: digits }, (_, k) => `d${k}.d * ${10 ** k}`).join(' + ');
  return `SELECT i FROM (SELECT ${sum} AS i FROM ${tables}) AS n WHERE i < ${count}`;
}

/** SQL for: the job name of number expression `n`; the time `seconds` (an SQL expression, may be fractional) before the base. */
function expressions(dialect: DialectName): { name: (n: string) => string; before: (seconds: string) => string; base: string } {
  if (dialect === 'postgres') {
    return {
      name: (n) => `'job-' || lpad((${n})::text, 5, '0')`,
      before: (seconds) => `base.t - (${seconds}) * interval '1 second'`,
      base: `(SELECT date_trunc('second', now()) AS t) AS base`,
    };
  }
  if (dialect === 'mysql') {
    return {
      name: (n) => `CONCAT('job-', LPAD(${n}, 5, '0'))`,
      before: (seconds) => `base.t - INTERVAL ROUND((${seconds}) * 1000000) MICROSECOND`,
      base: `(SELECT UTC_TIMESTAMP() AS t) AS base`,
    };
  }
  return {
    name: (n) => `printf('job-%05d', ${n})`,
    before: (seconds) => `strftime('%Y-%m-%dT%H:%M:%fZ', base.t, (-(${seconds})) || ' seconds')`,
    base: `(SELECT datetime('now') AS t) AS base`,
  };
}

/** Fills the runs, locks and jobs tables of `prefix`, then refreshes the planner's statistics. */
export async function seedHistory(raw: RawDatabase, dialect: DialectName, prefix: string, size: HistorySize): Promise<void> {
  const { name, before, base } = expressions(dialect);
  await raw.exec(`INSERT INTO ${prefix}runs
      (id, job_name, slot, status, locked_by, started_at, finished_at, duration_ms, lock_at_most_for_ms, lock_until)
    SELECT ${dialect === 'sqlite' ? `'seed-' || i` : `CONCAT('seed-', i)`}, ${name(`i % ${size.jobs}`)}, ${before('i')}, 'succeeded', 'seed',
           ${before('i')}, ${before('i - 0.01')}, 10, 60000, ${before('i - 60')}
      FROM (${numbers(dialect, size.runs)}) AS runs CROSS JOIN ${base}`);
  await raw.exec(`INSERT INTO ${prefix}locks (name, lock_until, locked_at, locked_by)
    SELECT ${name('i')}, ${before('86400')}, ${before('86400')}, 'seed' FROM (${numbers(dialect, size.jobs)}) AS jobs CROSS JOIN ${base}`);
  const schedules = new Map<string, number[]>();
  for (let job = 0; job < size.jobs; job += 1) {
    const expression = size.schedule?.(job);
    if (expression !== undefined) schedules.set(expression, [...(schedules.get(expression) ?? []), job]);
  }
  for (const [expression, jobs] of schedules) {
    if (!/^[-*/,0-9 ]+$/.test(expression)) throw new Error(`not a seedable expression: ${expression}`);
    // Jobs on one expression by a modulus when they are every k-th job, else by their list.
    const list = jobs.join(', ');
    await raw.exec(`INSERT INTO ${prefix}jobs
        (name, cron_expression, time_zone, lock_at_most_for_ms, lock_at_least_for_ms, catch_up_ms, declared_by, declared_at, changed_at)
      SELECT ${name('i')}, '${expression}', NULL, 60000, 0, NULL, 'seed', ${before('0')}, ${before('172800')}
        FROM (${numbers(dialect, size.jobs)}) AS jobs CROSS JOIN ${base} WHERE i IN (${list})`);
  }
  if ((size.declarations ?? 0) > 0) {
    await raw.exec(`INSERT INTO ${prefix}declarations (job_name, instance_id, locked_by, started_at, declared_at, stopped_at)
      SELECT ${name(`i % ${size.jobs}`)}, ${dialect === 'sqlite' ? `'seed-' || i` : `CONCAT('seed-', i)`}, 'seed',
             ${before('i * 60')}, ${before('i * 60 - 30')}, ${before('i * 60 - 30')}
        FROM (${numbers(dialect, size.declarations ?? 0)}) AS declarations CROSS JOIN ${base}`);
  }
  if (dialect === 'postgres')
    await raw.exec(`ANALYZE ${prefix}runs; ANALYZE ${prefix}locks; ANALYZE ${prefix}jobs; ANALYZE ${prefix}declarations`);
  else if (dialect === 'mysql') await raw.exec(`ANALYZE TABLE ${prefix}runs, ${prefix}locks, ${prefix}jobs, ${prefix}declarations`);
  else await raw.exec('ANALYZE');
}

/** More jobs after the first `from` (lock rows, each declared on `expression`), no runs: the job count grows, the history does not. */
export async function seedMoreJobs(
  raw: RawDatabase,
  dialect: DialectName,
  prefix: string,
  { from, to, expression }: { from: number; to: number; expression: string },
): Promise<void> {
  if (!/^[-*/,0-9 ]+$/.test(expression)) throw new Error(`not a seedable expression: ${expression}`);
  const { name, before, base } = expressions(dialect);
  const range = `(${numbers(dialect, to)}) AS jobs CROSS JOIN ${base} WHERE i >= ${from}`;
  await raw.exec(`INSERT INTO ${prefix}locks (name, lock_until, locked_at, locked_by)
    SELECT ${name('i')}, ${before('86400')}, ${before('86400')}, 'seed' FROM ${range}`);
  await raw.exec(`INSERT INTO ${prefix}jobs
      (name, cron_expression, time_zone, lock_at_most_for_ms, lock_at_least_for_ms, catch_up_ms, declared_by, declared_at, changed_at)
    SELECT ${name('i')}, '${expression}', NULL, 60000, 0, NULL, 'seed', ${before('0')}, ${before('172800')} FROM ${range}`);
}
