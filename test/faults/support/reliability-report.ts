// RELIABILITY.md, from the scenario reports of one `npm run test:faults` run.
import { cpus, totalmem } from 'node:os';
import Database from 'better-sqlite3';
import { openRaw } from '../../support/raw-database.js';
import { SCENARIOS, type ScenarioId, type ScenarioReport } from './scenario.js';

/** What each scenario does, for the reader of RELIABILITY.md; the file of the test says the rest. */
const DESCRIPTIONS: Record<ScenarioId, string> = {
  'contention-soak':
    'Separate OS processes fire every job at every slot (a timer on 200 ms slots, each fire a `guard.run({ slot })`), the job body takes 5 ms. ' +
    "Lost: a (job, slot) run twice, a slot nobody ran (unless every replica found it held by an earlier slot's run, or already passed by a later one: a skip by design, counted in the figures; more than a tenth of the slots so counts as lost), two runs of one job overlapping in time, history rows ≠ executions, errors. `test/faults/contention-soak.test.ts`.",
  'crashed-holder':
    'A holder in its own process is killed with SIGKILL mid-job; a contender ticks every 100 ms. Lost: a dead run not `abandoned`, a recovery later than ' +
    "`lockAtMostFor` + one tick (measured between the two runs' `started_at`, on the database clock), a takeover before `lockAtMostFor`. `test/faults/crashed-holder.test.ts`.",
  'paused-holder':
    'A holder in its own process is stopped with SIGSTOP past `lockAtMostFor`, a successor takes over, then SIGCONT. Expected, as docs/guarantees.md says: the two overlap. ' +
    "Lost: the paused run not `overran`, its late release freeing the successor's lock, its signal firing after its lock expired. `test/faults/paused-holder.test.ts`.",
  'database-restart':
    "The guard's own server (embedded PostgreSQL, mariadbd) is stopped and started again while an acquire waits on a row lock, while a job runs, and while a release waits on a row lock. " +
    "Lost: a crash or unhandled rejection, a job run while the server was down, no normal run within two ticks after, a history row left `running` once its lock expired. A waiting acquire may win its race with the shutdown (the row holder's session ends first): its job then runs as the committed holder, and after the restart its run must be in the history and its lock held. `test/faults/database-restart.test.ts`.",
  'clock-skew':
    "Three node-cron replicas (every second) under Debian's faketime at +30 s, 0 and −30 s; the +30 s one runs a slot first, then the others race it. " +
    'Lost: a slot label run twice, a second of real time with no run or with two, the fast clock not flagged by `doctor`. ' +
    '`test/faults/clock-skew.test.ts`.',
  'bad-input':
    'fast-check properties over job names (quotes, backslashes, NUL, emoji, SQL injection, 255 and 256 code points), durations and table prefixes. Lost: an invalid value accepted or ' +
    'refused without a TypeError naming it, a valid name not coming back byte-exact from the lock and history rows, a schema change. `test/faults/bad-input-*.test.ts`.',
  'slow-database':
    "Another session holds the job's lock row (`SELECT … FOR UPDATE`; SQLite: a write transaction) while a scheduler ticks every 100 ms with `acquireTimeout` 300 ms. " +
    'Lost: a tick not cut by acquireTimeout, a run while the row was held, more than one acquire of the job waiting at once (a pile-up), no run once the row is free. `test/faults/slow-database.test.ts`.',
  'pool-exhaustion':
    'Two replica processes, each with a pool of 5 connections (SQLite: its one connection), fire the same 1,000 jobs in the same second, five bursts. ' +
    'Lost: a call that never settled or threw, a job run by no replica or by two, an error skip, heap (after a GC) growing more than 5 MB from the first burst to the last. `test/faults/pool-exhaustion.test.ts`.',
  'hostile-job-errors':
    'Jobs throw what breaks naive error handling: messages with NUL, lone UTF-16 surrogates, 10,000 emoji; `Object.create(null)`, a revoked Proxy, objects whose `toString` or `message` getter throws. ' +
    'Every kind at once, round after round; right after each run rejects, another replica runs the same job. ' +
    'Lost: a lock left held (the replica skipped), a history row not in a final status or missing, error text a dialect cannot store, `run` rejecting with anything but the thrown value. `test/faults/hostile-job-errors.test.ts`.',
  'bad-server-settings':
    'Servers this scenario starts or configures itself: MariaDB with `NO_BACKSLASH_ESCAPES,ANSI_QUOTES` in sql_mode and `SERIALIZABLE` or `REPEATABLE READ` set globally; PostgreSQL with ' +
    "`default_transaction_isolation = 'repeatable read'` on the database. Four OS processes run 16 jobs, half with hostile names (quotes, backslashes, `-- `, backticks, emoji, 255 characters), " +
    'for the same slot at once, round after round, and `unlock()` every hostile name while another job holds its lock. Lost: a (job, slot) run twice or by nobody, ' +
    "a change to the other job's lock row, an error skip or a logged error. `test/faults/bad-server-settings.test.ts`.",
};

/** Scenarios that cannot apply to a dialect, and why: shown as such in the table, not run. */
const NOT_APPLICABLE: Partial<Record<ScenarioId, Record<string, string>>> = {
  'clock-skew': { sqlite: "SQLite's now() is each process's own clock; its replicas share one machine's clock" },
};

export async function serverVersions(urls: { postgres: string | null; mysql: string | null }): Promise<string[]> {
  const versions = [`SQLite ${new Database(':memory:').prepare('SELECT sqlite_version() AS v').pluck().get() as string}`];
  for (const [dialect, url] of [
    ['postgres', urls.postgres],
    ['mysql', urls.mysql],
  ] as const) {
    if (url === null) continue;
    const raw = await openRaw(dialect, url);
    try {
      const [row] = await raw.query<{ v: string }>('SELECT version() AS v');
      versions.push(dialect === 'postgres' ? (row?.v.split(' on ')[0] ?? '?') : `MariaDB/MySQL ${row?.v ?? '?'}`);
    } finally {
      await raw.close();
    }
  }
  return versions;
}

function result(report: ScenarioReport): string {
  if (report.failure !== undefined) return `**failed**: ${report.failure}`;
  const lost = Object.entries(report.lost).filter(([, count]) => count !== 0);
  return lost.length === 0 ? 'nothing lost' : `**lost**: ${lost.map(([what, count]) => `${what} ${count}`).join(', ')}`;
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

export function renderReliability(reports: ScenarioReport[], versions: string[], seconds: number): string {
  const lines = [
    '# cronguard reliability',
    '',
    `Written by \`npm run test:faults\` on ${new Date().toISOString().slice(0, 10)} in ${seconds} s. Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ` +
      `${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}. Databases: ${versions.join('; ')}, started by the run on this machine (loopback).`,
    '',
    'Every scenario runs real OS processes against real databases, with every loop bounded in count and time. For each scenario and dialect: what was done, ' +
      'how many times, and what was lost. The target is always nothing. The kinds of loss each scenario counts are listed in the `lost` column even when zero.',
    '',
  ];
  for (const [id, title] of Object.entries(SCENARIOS) as [ScenarioId, string][]) {
    lines.push(`## ${title}`, '', DESCRIPTIONS[id], '');
    const rows = reports.filter((report) => report.scenario === id);
    const notApplicable = Object.entries(NOT_APPLICABLE[id] ?? {});
    if (rows.length === 0 && notApplicable.length === 0) {
      lines.push('Not run in this run.', '');
      continue;
    }
    lines.push('| dialect | what was done | times | lost (each kind) | figures | result |', '| --- | --- | --- | --- | --- | --- |');
    for (const row of rows) {
      const kinds = Object.entries(row.lost)
        .map(([what, count]) => `${what}: ${count}`)
        .join(', ');
      lines.push(
        `| ${row.dialect} | ${escapeCell(row.done)} | ${row.times} | ${escapeCell(kinds === '' ? '-' : kinds)} | ${escapeCell(row.figures ?? '-')} | ${escapeCell(result(row))} |`,
      );
    }
    for (const [dialect, why] of notApplicable) lines.push(`| ${dialect} | not applicable: ${escapeCell(why)} | - | - | - | n/a |`);
    lines.push('');
  }
  return lines.join('\n');
}
