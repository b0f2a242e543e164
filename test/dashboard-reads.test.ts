// The dashboard's reads are bounded by what a page shows, never by the number of jobs or the size
// of the history: an overview costs the same statements at 60 jobs as at 600 (a page of 50 at a
// time, filtered by name and by problem), and every dashboard and ledger read of the runs table
// uses an index and reads a bounded number of rows (its plan, on a modest table with statistics;
// how long the reads take at a million rows is the bench's figure 12, not asserted here).
import { CompiledQuery, type Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { serve } from './support/dashboard.js';
import { databaseUrl, dialectTargets, uniquePrefix, type DialectTarget } from './support/dialects.js';
import { seededJob, seedHistory, type HistorySize } from './support/history-seed.js';
import { loggedKysely } from './support/logged-kysely.js';
import { openRaw } from './support/raw-database.js';

interface Seeded {
  readonly guard: Guard;
  readonly db: Kysely<unknown>;
  readonly log: CompiledQuery[];
  readonly prefix: string;
  readonly url: string;
}

async function seeded(target: DialectTarget, size: HistorySize): Promise<Seeded> {
  const url = databaseUrl(target);
  const prefix = uniquePrefix();
  const log: CompiledQuery[] = [];
  const db = loggedKysely(target, url, log);
  const guard = createGuard({ database: db, tablePrefix: prefix, telemetry: false });
  closeWhenTestEnds(async () => {
    await guard.close();
    await db.destroy();
  });
  await guard.migrate();
  const raw = await openRaw(target.name, url);
  try {
    await seedHistory(raw, target.name, prefix, size);
  } finally {
    await raw.close();
  }
  log.length = 0;
  return { guard, db, log, prefix, url };
}

/** The job names an overview page shows, in order. */
function shownJobs(page: string): string[] {
  return [...page.matchAll(/<a class="name" href="[^"]*">([^<]*)<\/a>/g)].map((match) => match[1] ?? '');
}

function nextLink(page: string): string | undefined {
  return /<a rel="next" href="([^"]*)"/.exec(page)?.[1]?.replaceAll('&amp;', '&');
}

describe.each(dialectTargets())('dashboard reads on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('an overview costs the same statements at 60 jobs as at 600: a page of 50 jobs, filtered by name and by problem', async () => {
      // Every 7th job has a declared every-second schedule its runs (one per `jobs` seconds) do not
      // keep: missed slots, a problem its section shows. The others ran on time: no problem.
      const schedule = (job: number): string | undefined => (job % 7 === 0 ? '* * * * * *' : undefined);
      const statements: { count: number; longest: number }[] = [];
      for (const jobs of [60, 600]) {
        const { guard, log, prefix } = await seeded(target, { runs: jobs * 10, jobs, schedule });
        const base = await serve(guard.dashboard());
        const page = await (await fetch(`${base}/`)).text();
        // Lengths without the table prefix, which is one character longer once the process's
        // prefix counter reaches 10 (the newest runs' statement names the runs table 50 times).
        statements.push({ count: log.length, longest: Math.max(...log.map((query) => query.sql.replaceAll(prefix, '').length)) });
        expect(shownJobs(page)).toEqual(Array.from({ length: 50 }, (_, index) => seededJob(index)));
        if (jobs === 60) continue;

        // The next page starts after the last name shown.
        const next = nextLink(page);
        expect(next).toBe('/?after=job-00049');
        const second = await (await fetch(`${base}${next}`)).text();
        expect(shownJobs(second)).toEqual(Array.from({ length: 50 }, (_, index) => seededJob(50 + index)));
        // Names containing a text.
        const named = await (await fetch(`${base}/?q=00599`)).text();
        expect(shownJobs(named)).toEqual(['job-00599']);
        expect(nextLink(named)).toBeUndefined();
        // Only jobs with a problem: 50 of the every-7th, then the next page from the last one shown.
        log.length = 0;
        const problems = await (await fetch(`${base}/?problems=1`)).text();
        const expected = Array.from({ length: 86 }, (_, index) => seededJob(index * 7));
        expect(shownJobs(problems)).toEqual(expected.slice(0, 50));
        // Seven pages of names looked through, each the same reads as one overview.
        expect(log.length).toBeLessThanOrEqual(7 * (statements[0]?.count ?? 0));
        const rest = await (await fetch(`${base}${nextLink(problems) ?? 'none'}`)).text();
        expect(shownJobs(rest)).toEqual(expected.slice(50));
        expect(nextLink(rest)).toBeUndefined();
      }
      // Independent of the number of jobs: as many statements, none longer.
      expect(statements[1]).toEqual(statements[0]);
      // A dozen at most: the lock rows, the schedules (and once, their schema version), the newest runs,
      // the ledger's runs, triggers, pauses and clean stops, the replicas; none of them one per job.
      expect(statements[0]?.count).toBeLessThanOrEqual(12);
    }, 120_000);

    it('every dashboard and ledger read of the runs table uses an index and reads a bounded number of rows', async () => {
      // 100 jobs × 200 runs (one per 100 s): a read of all of a job's runs is 200 rows, of all runs 20,000;
      // 100 × 50 declarations (process starts, each stopped cleanly): 5,000 rows.
      const { guard, db, log, prefix } = await seeded(target, {
        runs: 20_000,
        jobs: 100,
        schedule: () => '* * * * * *',
        declarations: 5_000,
      });
      const base = await serve(guard.dashboard());
      for (const path of ['/', '/job?name=job-00007', '/job?name=job-00007&range=7d', '/run?id=seed-7007']) {
        expect((await fetch(`${base}${path}`)).status).toBe(200);
      }
      await guard.slots({ job: 'job-00007', since: '24h' });
      const reads = log.filter((query) => query.sql.includes(`${prefix}runs`));
      // The overview's runs and ledger, the job page's history and ledger (twice), guard.slots, the run and its neighbours.
      expect(reads.length).toBeGreaterThanOrEqual(8);
      for (const query of reads) {
        const plan = await planOf(target, db, query);
        const runsTable = plan.filter((access) => access.table === `${prefix}runs` || access.table === 'r' || access.table === 'this_run');
        expect(runsTable.length, query.sql).toBeGreaterThan(0);
        for (const access of runsTable) {
          expect(access.index, `${access.table} in ${query.sql}`).toMatch(
            new RegExp(`^${prefix}runs_(job_started|job_slot)$|^sqlite_autoindex_${prefix}runs_1$|_pkey$|^PRIMARY$`),
          );
          // The most rows a page asks for: the overview's 50 runs of each of its 50 jobs (the job
          // page's 7 d axis, 1,001), against 20,000 for the history or 10,000 for those jobs' runs.
          if (access.rows !== undefined) expect(access.rows, `${access.table} in ${query.sql}`).toBeLessThanOrEqual(50 * 50);
        }
      }
      // The page's clean stops (migration 007's table, a row per process start): one statement, each
      // job's rows by the primary key's prefix, at most DASHBOARD_DECLARATIONS_PER_JOB of each back.
      const declarations = log.filter((query) => query.sql.includes(`${prefix}declarations`));
      expect(declarations.length).toBeGreaterThanOrEqual(2);
      for (const query of declarations) {
        const plan = await planOf(target, db, query);
        const table = plan.filter((access) => access.table === `${prefix}declarations`);
        expect(table.length, query.sql).toBeGreaterThan(0);
        for (const access of table) {
          expect(access.index, query.sql).toMatch(
            new RegExp(`^${prefix}declarations_pkey$|^sqlite_autoindex_${prefix}declarations_1$|^PRIMARY$`),
          );
          // A job's own rows (50 each), never the table's 5,000.
          if (access.rows !== undefined) expect(access.rows, query.sql).toBeLessThanOrEqual(50 * 50);
        }
      }
    }, 120_000);
  });
});

/** One table access of a plan: the table (or alias), the index it reads (undefined: a full scan), the rows it read when the plan says. */
interface TableAccess {
  readonly table: string;
  readonly index: string | undefined;
  readonly rows: number | undefined;
}

/** The plan of a statement, run (PostgreSQL's EXPLAIN ANALYZE, MariaDB's ANALYZE) where the server can, for the rows it really read. */
async function planOf(target: DialectTarget, db: Kysely<unknown>, query: CompiledQuery): Promise<TableAccess[]> {
  const explain = async <Row>(prefix: string): Promise<Row[]> =>
    (await db.executeQuery<Row>(CompiledQuery.raw(`${prefix} ${query.sql}`, [...query.parameters]))).rows;
  if (target.name === 'postgres') {
    const [row] = await explain<{ 'QUERY PLAN': unknown }>('EXPLAIN (ANALYZE, FORMAT JSON)');
    const accesses: TableAccess[] = [];
    const walk = (node: Record<string, unknown>): void => {
      const relation = node['Relation Name'];
      if (typeof relation === 'string') {
        const index = node['Index Name'] ?? (node['Node Type'] === 'Bitmap Heap Scan' ? bitmapIndex(node) : undefined);
        const rows = Number(node['Actual Rows']) * Number(node['Actual Loops']);
        accesses.push({ table: relation, index: index as string | undefined, rows });
      }
      for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    const plan = (row?.['QUERY PLAN'] as { Plan: Record<string, unknown> }[] | undefined)?.[0]?.Plan;
    if (plan !== undefined) walk(plan);
    return accesses;
  }
  if (target.name === 'mysql') {
    const [row] = await explain<Record<string, string>>('ANALYZE FORMAT=JSON');
    const accesses: TableAccess[] = [];
    const walk = (value: unknown): void => {
      if (Array.isArray(value)) return value.forEach(walk);
      if (value === null || typeof value !== 'object') return;
      const object = value as Record<string, unknown>;
      const table = object['table'] as Record<string, unknown> | undefined;
      if (table !== undefined && typeof table['table_name'] === 'string' && !table['table_name'].startsWith('<')) {
        const loops = Number(table['r_loops'] ?? 1);
        const read = table['r_rows'] === undefined ? undefined : Number(table['r_rows']) * loops;
        accesses.push({
          table: table['table_name'],
          index: table['access_type'] === 'ALL' ? undefined : (table['key'] as string | undefined),
          rows: read,
        });
      }
      Object.values(object).forEach(walk);
    };
    walk(JSON.parse(Object.values(row ?? {})[0] ?? '{}'));
    return accesses;
  }
  const rows = await explain<{ detail: string }>('EXPLAIN QUERY PLAN');
  return rows.flatMap(({ detail }): TableAccess[] => {
    const search = /^(?:SEARCH|SCAN) (\S+)(?: AS (\S+))?(?: USING (?:COVERING )?INDEX (\S+)| USING (?:INTEGER )?PRIMARY KEY)?/.exec(detail);
    if (search === null || search[1]?.startsWith('(') === true) return [];
    // SCAN (even USING INDEX) reads the whole table or index; only a SEARCH reads a range of it.
    const index = detail.startsWith('SCAN')
      ? undefined
      : (search[3] ?? (/USING (INTEGER )?PRIMARY KEY/.test(detail) ? 'PRIMARY' : undefined));
    return [{ table: search[2] ?? search[1] ?? '', index, rows: undefined }];
  });
}

function bitmapIndex(node: Record<string, unknown>): string | undefined {
  const child = (node['Plans'] as Record<string, unknown>[] | undefined)?.find((plan) => String(plan['Node Type']).startsWith('Bitmap'));
  if (child === undefined) return undefined;
  return (child['Index Name'] as string | undefined) ?? bitmapIndex(child);
}
