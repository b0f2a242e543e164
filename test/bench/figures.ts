// The figures of BENCHMARKS.md for one dialect. Each returns rows for its table.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { CompiledQuery } from 'kysely';
import { createGuard, type Guard } from '../../src/index.js';
import type { BenchDriver } from './drivers.js';
import { interleaved, ratio, series, us, type Summary } from './measure.js';
import { importOldRelease } from '../support/old-release.js';
import { createReferenceLock } from './reference.js';

export interface Figure {
  readonly title: string;
  readonly rows: Record<string, string | number | boolean | Summary>[];
}

const quiet = { warn: () => undefined, error: () => undefined };
const noop = (): undefined => undefined;

/**
 * A series of one guard's runs of `job` that must all end as `expected` (executed, or skipped as
 * locked): a series that measured the other outcome would time another path and still print a
 * ratio. Figure 6 on MySQL did, until 2026-12-07: its replay kept the lock, so its guard lost.
 */
function runsThatAre(
  expected: 'won' | 'lost',
  guard: Guard,
  job: { readonly name: string; readonly lockAtMostFor: string },
): () => Promise<void> {
  return async () => {
    const result = await guard.run(job, noop);
    const ended = result.executed ? 'won' : result.reason === 'locked' ? 'lost' : `was skipped as ${result.reason}`;
    if (ended !== expected) throw new Error(`cronguard bench: a run of "${job.name}" was to be ${expected} and ${ended}`);
  };
}

export interface DialectFigures {
  floorSelect: Summary;
  floorUpdate: Summary;
  win: { guard: Summary; floor: Summary; ratio: number; statements: number };
  /** `rowRead`: the probe's own read of the lock row sent straight through the driver, the least a loser can cost. */
  lose: {
    guard: Summary;
    select: Summary;
    ratio: number;
    rowRead: { guard: Summary; read: Summary; ratio: number };
    /** The same loser in cronguard 0.1.0, before the operator controls put the pause in the probe. */
    beforeControls: { guard: Summary; old: Summary; ratio: number };
    walBytesPerAttempt: number | null;
  };
  /** `withoutHistoryWin`: a guard with `history: false`, which writes what the reference writes. */
  reference: {
    win: { guard: Summary; reference: Summary; ratio: number };
    withoutHistoryWin: { guard: Summary; reference: Summary; ratio: number };
    lose: { guard: Summary; reference: Summary; ratio: number };
  };
  overhead: { guard: Summary; direct: Summary; ratio: number };
}

export async function measureDialect(driver: BenchDriver, iterations: number): Promise<DialectFigures> {
  const guard = createGuard({ database: driver.guardDatabase, tablePrefix: 'bench_', logger: quiet, telemetry: false });
  await guard.migrate();
  // Another guard on the same connection and tables, whose statements are logged: it counts and
  // captures what a win sends, so that the measured guard runs with nothing in between.
  const capture = createGuard({
    database: driver.loggedGuardDatabase,
    tablePrefix: 'bench_',
    logger: quiet,
    telemetry: false,
  });
  // What a win sends: the capture's log without the replica's presence row (written after a
  // guard's first lock and then hourly, in the background), which is not part of a win.
  const winStatements = (): CompiledQuery[] => driver.takeLog().filter((query) => !query.sql.includes('bench_replicas'));
  const placeholder = (n: number): string => (driver.dialect === 'postgres' ? `$${n}` : '?');
  await driver.raw('CREATE TABLE IF NOT EXISTS bench_floor (id integer PRIMARY KEY, n integer NOT NULL)');
  await driver.raw(`DELETE FROM bench_floor`);
  await driver.raw(`INSERT INTO bench_floor (id, n) VALUES (1, 0)`);
  const select1 = () => driver.raw('SELECT 1');
  const update1 = () => driver.raw(`UPDATE bench_floor SET n = n + 1 WHERE id = ${placeholder(1)}`, [1]);

  // 1. The floor.
  const floorSelect = await series(iterations, select1);
  const floorUpdate = await series(iterations, update1);

  // 2. The win path, against as many raw single-row updates as the win sends statements.
  const winJob = { name: 'win', lockAtMostFor: '1m' };
  // The first win probes; from the second on, the guard knows it released the lock itself.
  await capture.run(winJob, noop);
  driver.takeLog();
  await capture.run(winJob, noop);
  const statements = winStatements().length;
  const updates = async () => {
    for (let i = 0; i < statements; i += 1) await update1();
  };
  const win = await interleaved(iterations, runsThatAre('won', guard, winJob), updates);

  // 3. The loser path: a holder keeps the lock; the contender loses every time.
  const holder = createGuard({
    database: driver.guardDatabase,
    tablePrefix: 'bench_',
    logger: quiet,
    telemetry: false,
  });
  await holder.run({ name: 'held', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, noop);
  const loseJob = { name: 'held', lockAtMostFor: '1m' };
  const lose = await interleaved(iterations, runsThatAre('lost', guard, loseJob), select1);
  const rowRead = await interleaved(iterations, runsThatAre('lost', guard, loseJob), () =>
    driver.rawPrepared(`SELECT lock_until, last_slot FROM bench_locks WHERE name = ${placeholder(1)}`, ['held']),
  );
  // The loser of cronguard 0.1.0 (the committed tarball of the upgrade tests) on tables of its own:
  // the operator controls read the pause in the probe's one statement, so an unpaused loser should
  // cost what it cost before them.
  const oldRelease = await importOldRelease();
  const oldGuard = oldRelease.createGuard({ database: driver.guardDatabase, tablePrefix: 'bench_old_', logger: quiet });
  await oldGuard.migrate();
  const oldHolder = oldRelease.createGuard({ database: driver.guardDatabase, tablePrefix: 'bench_old_', logger: quiet });
  await oldHolder.run({ name: 'held', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, noop);
  const beforeControls = await interleaved(iterations, runsThatAre('lost', guard, loseJob), async () => {
    if ((await oldGuard.run(loseJob, noop)).executed) throw new Error('cronguard bench: the 0.1.0 loser won a lock its holder keeps');
  });
  await oldGuard.close();
  await oldHolder.close();
  const walBytesPerAttempt = driver.dialect === 'postgres' ? await walPerAttempt(driver, guard, loseJob, iterations) : null;

  // 4. ShedLock's algorithm through the same driver.
  const reference = await againstReference(driver, guard, iterations);

  // 6. Library overhead: the same SQL text, replayed straight through the driver.
  await capture.run(winJob, noop);
  driver.takeLog();
  await capture.run(winJob, noop);
  const replay = winStatements();
  // The win's token, to be replaced by a fresh one at each replay (a run id is unique), wherever
  // it is: a parameter of its own, or inside one (MySQL's take procedure gets its jobs as one JSON
  // text). Through a Kysely on MySQL the guard sends strings as bytes (a Buffer), so a parameter
  // may be either. A replay that kept the captured token would take the lock and never release it.
  const textOf = (value: unknown): string | undefined =>
    typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : undefined;
  const token = replay
    .flatMap((query) => query.parameters)
    .map((value) => textOf(value)?.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/)?.[0])
    .find((text) => text !== undefined);
  if (token === undefined) throw new Error(`${driver.dialect}: no token among the captured win's parameters`);
  const withToken = (value: unknown, fresh: string): unknown => {
    const text = textOf(value);
    if (text === undefined || !text.includes(token)) return value;
    const replaced = text.replaceAll(token, fresh);
    return Buffer.isBuffer(value) ? Buffer.from(replaced) : replaced;
  };
  const direct = async () => {
    const fresh = randomUUID();
    for (const query of replay)
      await driver.rawPrepared(
        query.sql,
        query.parameters.map((value) => withToken(value, fresh)),
      );
  };
  const overhead = await interleaved(iterations, runsThatAre('won', guard, winJob), direct);

  await holder.close();
  await capture.close();
  await guard.close();
  return {
    floorSelect,
    floorUpdate,
    win: { guard: win.a, floor: win.b, ratio: win.ratio, statements },
    lose: {
      guard: lose.a,
      select: lose.b,
      ratio: lose.ratio,
      rowRead: { guard: rowRead.a, read: rowRead.b, ratio: rowRead.ratio },
      beforeControls: { guard: beforeControls.a, old: beforeControls.b, ratio: beforeControls.ratio },
      walBytesPerAttempt,
    },
    reference,
    overhead: { guard: overhead.a, direct: overhead.b, ratio: overhead.ratio },
  };
}

/**
 * Figure 4: ShedLock's algorithm (reference.ts) through the same driver, each series interleaved
 * with it: `guard`'s win (with history), a guard's win with `history: false`, and `guard`'s loss on
 * the job 'held', which another guard of the caller holds on the same tables.
 */
export async function againstReference(driver: BenchDriver, guard: Guard, iterations: number): Promise<DialectFigures['reference']> {
  const reference = await createReferenceLock(driver);
  // Each series must measure what it names: the reference's win always wins (it released the lock
  // the time before), its loser always loses (the lock 'held' is kept by 'holder').
  const referenceWin = async () => {
    if (!(await reference.acquire('win', 'bench'))) throw new Error('cronguard bench: the reference lost a win it should have won');
    await reference.release('win', 'bench');
  };
  const win = await interleaved(iterations, runsThatAre('won', guard, { name: 'win', lockAtMostFor: '1m' }), referenceWin);
  const withoutHistory = createGuard({
    database: driver.guardDatabase,
    tablePrefix: 'bench_',
    logger: quiet,
    telemetry: false,
    history: false,
  });
  const withoutHistoryJob = { name: 'win-without-history', lockAtMostFor: '1m' };
  const bare = await interleaved(iterations, runsThatAre('won', withoutHistory, withoutHistoryJob), referenceWin);
  await withoutHistory.close();
  // Taken just before its series: the reference holds a lock 60 s.
  if (!(await reference.acquire('held', 'holder'))) throw new Error("cronguard bench: the reference's holder could not take 'held'");
  const lose = await interleaved(iterations, runsThatAre('lost', guard, { name: 'held', lockAtMostFor: '1m' }), async () => {
    if (await reference.acquire('held', 'bench')) throw new Error('cronguard bench: the reference won a lock another holder keeps');
  });
  return {
    win: { guard: win.a, reference: win.b, ratio: win.ratio },
    withoutHistoryWin: { guard: bare.a, reference: bare.b, ratio: bare.ratio },
    lose: { guard: lose.a, reference: lose.b, ratio: lose.ratio },
  };
}

/** Figure 4's table: its heading, what it measures, and a row per dialect. */
export function referenceLines(results: readonly { dialect: string; reference: DialectFigures['reference'] }[]): string[] {
  const verdict = (met: boolean): string => (met ? 'met' : '**not met**');
  return [
    "## 4. Against the reference algorithm: ShedLock's JDBC provider with database time",
    '',
    'Written out in `test/bench/reference.ts` through the same driver: PostgreSQL `INSERT … ON CONFLICT (name) DO UPDATE … WHERE lock_until <= now()`; ' +
      'MySQL `INSERT IGNORE`, then a conditional `UPDATE`; SQLite insert, then update on a duplicate key; release by name and `locked_by`. ' +
      "PostgreSQL's as named prepared statements, as pgjdbc sends them after its prepareThreshold. The reference keeps no history: the win is " +
      'measured twice, as cronguard ships (its win also starts and finishes a run row) and with `history: false` (only the lock row, like the ' +
      'reference), each interleaved with the reference in a series of its own. Targets: win no slower (≤ 1.0×); PostgreSQL loser at least 3× faster (ratio ≤ 0.33). ' +
      '`npm run bench -- --only reference` measures this figure alone.',
    '',
    '| dialect | win with history: guard / reference p50 | ratio | target | win with `history: false`: guard / reference p50 | ratio | target | lose: guard / reference p50 | lose ratio | target |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...results.map(({ dialect, reference: { win, withoutHistoryWin: bare, lose } }) => {
      const loseTarget = dialect === 'postgres' ? verdict(lose.ratio <= 1 / 3) : 'none';
      return (
        `| ${dialect} | ${us(win.guard.p50)} / ${us(win.reference.p50)} | ${ratio(win.ratio)} | ${verdict(win.ratio <= 1)} | ` +
        `${us(bare.guard.p50)} / ${us(bare.reference.p50)} | ${ratio(bare.ratio)} | ${verdict(bare.ratio <= 1)} | ` +
        `${us(lose.guard.p50)} / ${us(lose.reference.p50)} | ${ratio(lose.ratio)} | ${loseTarget} |`
      );
    }),
    '',
  ];
}

/** WAL bytes PostgreSQL inserts per losing attempt (the insert position, not the write position). */
async function walPerAttempt(
  driver: BenchDriver,
  guard: Guard,
  job: { name: string; lockAtMostFor: string },
  attempts: number,
): Promise<number> {
  const lsn = async (): Promise<string> => {
    const result = (await driver.kysely.executeQuery(CompiledQuery.raw('SELECT pg_current_wal_insert_lsn()::text AS lsn'))) as {
      rows: { lsn: string }[];
    };
    return result.rows[0]?.lsn ?? '0/0';
  };
  const before = await lsn();
  const lost = runsThatAre('lost', guard, job);
  for (let i = 0; i < attempts; i += 1) await lost();
  const after = await lsn();
  const diff = (await driver.kysely.executeQuery(
    CompiledQuery.raw('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS bytes', [after, before]),
  )) as {
    rows: { bytes: string }[];
  };
  return Number(diff.rows[0]?.bytes ?? Number.NaN) / attempts;
}

export interface MemoryFigure {
  /** RSS after each checkpoint's number of runs, ascending. */
  readonly readings: readonly { runs: number; rssMb: number }[];
}

/**
 * RSS of a guard on SQLite after each checkpoint's number of executions (figure 8), in a fresh
 * process on the built dist/, so that what the figures before it left in this process is not
 * counted. `pinnedYoungGeneration`: V8's young generation fixed at its default maximum (16 MB
 * semi-spaces). Left to its adaptive sizing, it starts small and doubles up to that cap some time
 * after the first reading (+16 MB, then flat): V8's sizing, not memory the guard keeps. The figure
 * reports both.
 */
export function memoryGrowth(
  url: string,
  checkpoints: readonly number[],
  { pinnedYoungGeneration }: { pinnedYoungGeneration: boolean },
): Promise<MemoryFigure> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(new URL('./memory-child.mjs', import.meta.url)), [url, ...checkpoints.map(String)], {
      execArgv: ['--expose-gc', ...(pinnedYoungGeneration ? ['--min-semi-space-size=16', '--max-semi-space-size=16'] : [])],
    });
    let readings: { runs: number; rssMb: number }[] | undefined;
    child.on('message', (message) => (readings = message as { runs: number; rssMb: number }[]));
    child.on('error', reject);
    child.on('exit', (code) =>
      readings === undefined ? reject(new Error(`memory figure: the child exited with ${code}`)) : resolve({ readings }),
    );
  });
}
