// Figure 10: one page of a job's history on PostgreSQL with a large runs table. The test
// (test/postgres-history-plan.test.ts) checks the plan reads the index; how long the page takes is
// a figure of this machine, so it is measured here and not asserted in the test suite.
import pg from 'pg';
import { createGuard } from '../../src/index.js';
import { series, type Summary } from './measure.js';

export interface HistoryPageFigure {
  readonly rows: number;
  readonly page: Summary;
}

/** The page the CLI's `history --job X --limit 50` asks for. */
const PAGE = 50;
/** Target for the p50 of one page, in ms. */
export const HISTORY_PAGE_TARGET_MS = 50;

/** Fills a runs table of its own with `rows` runs of 100 jobs, then times `guard.history({ job, limit: 50 })`. */
export async function historyPage(url: string, rows: number, iterations: number): Promise<HistoryPageFigure> {
  const prefix = 'bench_history_';
  const guard = createGuard({ database: url, tablePrefix: prefix, telemetry: false });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await guard.migrate();
    // The rows are written straight in (one statement) rather than by `rows` runs: the figure is the read.
    await client.query(
      `INSERT INTO ${prefix}runs
        (id, job_name, status, locked_by, started_at, finished_at, duration_ms, lock_at_most_for_ms, lock_until, overran)
      SELECT md5(i::text), 'job-' || (i % 100), 'succeeded', 'bench', now() - i * interval '1 second',
             now() - i * interval '1 second' + interval '10 milliseconds', 10, 60000, now(), false
        FROM generate_series(1, $1::int) AS i`,
      [rows],
    );
    await client.query(`ANALYZE ${prefix}runs`);
    const page = await series(iterations, () => guard.history({ job: 'job-7', limit: PAGE }));
    return { rows, page };
  } finally {
    await guard.close();
    await client
      .query(`DROP TABLE IF EXISTS ${prefix}runs, ${prefix}locks, ${prefix}migrations, ${prefix}migrations_lock`)
      .catch(() => undefined);
    await client.end();
  }
}

export function historyPageLines(figure: HistoryPageFigure | undefined, verdict: (met: boolean) => string): string[] {
  if (figure === undefined) return ['Not measured.', ''];
  const ms = (us: number): string => `${(us / 1_000).toFixed(2)} ms`;
  return [
    `\`guard.history({ job, limit: ${PAGE} })\` on a runs table of ${figure.rows.toLocaleString('en-US')} rows (100 jobs), as \`cronguard history ` +
      `--job X --limit ${PAGE}\` asks for it; the plan (an index scan of (job_name, started_at, id), no sort) is checked by the test suite. ` +
      `Target: p50 under ${HISTORY_PAGE_TARGET_MS} ms.`,
    '',
    '| rows | p50 | p99 | target |',
    '| --- | --- | --- | --- |',
    `| ${figure.rows.toLocaleString('en-US')} | ${ms(figure.page.p50)} | ${ms(figure.page.p99)} | ${verdict(figure.page.p50 < HISTORY_PAGE_TARGET_MS * 1_000)} |`,
    '',
  ];
}
