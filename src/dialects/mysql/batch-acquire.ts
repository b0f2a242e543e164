import type { AcquireOutcome, AcquireRequest, BatchedAcquire } from '../../core/dialect.js';
import { noteFireStep } from '../../core/fire-timeline.js';
import type { ResolvedJob } from '../../core/job-options.js';
import {
  boundRows,
  byNameBytes,
  marks,
  nameColumn,
  padded,
  perRows,
  type BoundColumn,
  type LockStatements,
  type TransactionStatement,
  mysqlTime,
  perCount,
  DUPLICATE_KEY,
} from './statements.js';

/** What the batch statements share with the one-job statements of lock-store.ts. */
export interface MysqlBatchAcquireParts {
  /** The quoted lock and run tables. */
  readonly locks: string;
  readonly runs: string;
  readonly history: boolean;
  /** The pause tests on the lock row's unqualified columns (`TRUE`/`FALSE` before migration 004). */
  readonly notPaused: string;
  readonly pausedNow: string;
  readonly statements: LockStatements;
  /** The one-job acquire (lock-store.ts), for a batch of which only one job looks free. */
  acquireOne(job: ResolvedJob, request: AcquireRequest): Promise<AcquireOutcome>;
  /** The take in one call of the take procedure (lock-store.ts): each acquire's row state after it, or undefined when it cannot be made. */
  takeByCall(wanted: readonly Wanted[]): Promise<Map<Wanted, RowState> | undefined>;
}

const slotColumn: BoundColumn = { alias: 'slot', value: 'CAST(? AS DATETIME(3))' };
// A token as bytes: compared with the token column byte for byte (tokens are ASCII), with no collation to mix.
const tokenColumn: BoundColumn = { alias: 'token', value: 'CAST(? AS BINARY)' };
const atMostColumn: BoundColumn = { alias: 'at_most_ms', value: 'CAST(? AS SIGNED)' };
/** Acquires in the order their lock rows are locked: by name, as bytes (the server's VARBINARY order). */
export const byName = byNameBytes<Wanted>(({ job }) => job.name);

/**
 * `LockStore.acquireMany` on MySQL/MariaDB: the acquires of one turn of the event loop as one probe
 * for all that need one, then, for all that look free, one transaction of a constant number of
 * statements: the take (one UPDATE), which of them it won (one read, skipped when it won them
 * all), the rows of names that have none (one INSERT), and every winner's run row (one INSERT …
 * SELECT). Each job keeps its own decision, token, run row, slot check and pause test; a loser
 * writes nothing, as in the one-job path.
 *
 * Why a transaction, when the one-job path is autocommit statements: a batch must take nothing
 * when it fails (the guard then sends each acquire alone), and a take that committed before the
 * run rows failed would have moved the slot watermark of every job of the batch, so that each
 * then sent alone found its slot "done" and did not run. In the transaction, one job's refused run
 * row rolls the whole batch back, and each job then gets its own attempt. It holds the row locks
 * of the take (the rows it took and, under REPEATABLE READ, the rows it scanned and did not take)
 * from the UPDATE to COMMIT: two to four round trips, one when it took none (why each lost is then
 * read after COMMIT). Another replica's take of the same rows waits
 * that long and then loses (they are taken); its probe, a plain read, does not wait at all.
 */
export function mysqlBatchAcquirer(parts: MysqlBatchAcquireParts): (acquires: readonly BatchedAcquire[]) => Promise<AcquireOutcome[]> {
  const { locks, runs, history, notPaused, pausedNow, statements } = parts;

  // What each lock row says, for the probe (token NULL: `mine` never matches) and, after a take
  // that did not win every row, for which rows it won (a token is unique to one execution, so a
  // row holding this acquire's token is this acquire's win) and why each loser lost. A plain
  // read: no row lock, no write. The requests are a derived table of bound rows (statements.ts)
  // joined on the primary key; a name without a row answers `missing`. The CASE is the one-job
  // probe's, in its order.
  const statesSql = perRows((count) =>
    statements.acquireText(`SELECT r.i, CASE WHEN l.name IS NULL THEN 'missing' WHEN l.token = r.token THEN 'mine'
            WHEN ${pausedNow} THEN 'paused' WHEN l.last_slot >= r.slot THEN 'slot-done'
            WHEN l.lock_until > UTC_TIMESTAMP(3) THEN 'locked' ELSE 'free' END AS state
  FROM (${boundRows([nameColumn, slotColumn, tokenColumn], count)}) r
  LEFT JOIN ${locks} l ON l.name = r.name`),
  );
  const statesParameters = (wanted: readonly Wanted[], withTokens: boolean): unknown[] =>
    padded(
      wanted.flatMap(({ job, request, slot }) => [job.name, slot, withTokens ? request.token : null]),
      3,
      wanted.length,
    );

  // The take for many jobs: the one-job take (lock-store.ts), each per-row value chosen by the
  // row's name (CASE name WHEN ? THEN ?) among the bound values. A single-table UPDATE, not a
  // multi-table one joined to a derived table of the requests: only a single-table UPDATE runs
  // its assignments left to right (previous_token must read the token before it is replaced) and
  // takes an ORDER BY, which makes every batch lock its rows in name order, so that two batches
  // never wait for each other in a circle. Like the one-job take it re-checks each row on its
  // newest version, waits for a row another session is writing, and changes only the rows it
  // takes: with or without CLIENT_FOUND_ROWS, its affected count is the number of rows won.
  // A scheduled request takes its row only when its slot is newer than the row's last one
  // (COALESCE: an unscheduled request, or a row without a slot, passes).
  const takeSql = perRows((count) => {
    const perName = (value: string): string => `CASE name ${Array.from({ length: count }, () => `WHEN ? THEN ${value}`).join(' ')} END`;
    return statements.acquireText(`UPDATE ${locks}
   SET previous_token = token,
       lock_until = UTC_TIMESTAMP(3) + INTERVAL CAST(${perName('?')} AS SIGNED) MICROSECOND,
       locked_at = UTC_TIMESTAMP(3), locked_by = ${perName('?')}, token = ${perName('?')},
       last_slot = COALESCE(CAST(${perName('?')} AS DATETIME(3)), last_slot)
 WHERE name IN (${marks(count)}) AND lock_until <= UTC_TIMESTAMP(3) AND ${notPaused}
   AND COALESCE(last_slot < CAST(${perName('?')} AS DATETIME(3)), TRUE)
 ORDER BY name`);
  });
  const takeParameters = (wanted: readonly Wanted[]): unknown[] => {
    const perName = (value: (one: Wanted) => unknown): unknown[] =>
      padded(
        wanted.flatMap((one) => [one.job.name, value(one)]),
        2,
        wanted.length,
      );
    return [
      ...perName(micros),
      ...perName(({ request }) => request.lockedBy),
      ...perName(({ request }) => request.token),
      ...perName(({ slot }) => slot),
      ...padded(
        wanted.map(({ job }) => job.name),
        1,
        wanted.length,
      ),
      ...perName(({ slot }) => slot),
    ];
  };

  // Every winner's run row, and `abandoned` for each run it took over from, as the one-job start
  // does (lock-store.ts): the first SELECT copies each winner's times from its lock row (the
  // database's clock), the second finds the run each took over from, still `running`, through the
  // lock row's previous_token, and the duplicate key turns its insert into that update. The
  // winners' rows are found by name and token (IN lists: a token is on one row only), read by
  // primary key (STRAIGHT_JOIN, FORCE INDEX), as in the take procedure: an INSERT … SELECT locks
  // the rows it reads, and on a small table the optimizer would rather scan them all, locking
  // rows another batch holds, so that two batches of disjoint jobs deadlocked (and were retried).
  const startSql = perRows((count) =>
    statements.acquireText(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
SELECT l.token, l.name, w.slot, 'running', l.locked_by, l.locked_at, w.at_most_ms, l.lock_until
  FROM (${boundRows([nameColumn, tokenColumn, slotColumn, atMostColumn], count)}) w
  STRAIGHT_JOIN ${locks} l FORCE INDEX (PRIMARY) ON l.name = w.name AND l.token = w.token
UNION ALL
SELECT r.id, r.job_name, r.slot, r.status, r.locked_by, r.started_at, r.lock_at_most_for_ms, r.lock_until
  FROM ${locks} l FORCE INDEX (PRIMARY) STRAIGHT_JOIN ${runs} r FORCE INDEX (PRIMARY) ON r.id = l.previous_token
 WHERE l.name IN (${marks(count)}) AND l.token IN (${marks(count)}) AND r.status = 'running'
ON DUPLICATE KEY UPDATE status = 'abandoned'`),
  );
  const startParameters = (wanted: readonly Wanted[]): unknown[] => [
    ...padded(
      wanted.flatMap(({ job, request, slot }) => [job.name, request.token, slot, Math.round(job.lockAtMostForMs)]),
      4,
      wanted.length,
    ),
    ...padded(
      wanted.map(({ job }) => job.name),
      1,
      wanted.length,
    ),
    ...padded(
      wanted.map(({ request }) => request.token),
      1,
      wanted.length,
    ),
  ];

  const readStates = async (run: TransactionStatement, wanted: readonly Wanted[], withTokens: boolean): Promise<Map<Wanted, RowState>> => {
    const { rows } = await run<{ i: number | bigint; state: RowState }>(statesSql(wanted.length), statesParameters(wanted, withTokens));
    const states = new Map<Wanted, RowState>();
    for (const { i, state } of rows) {
      const one = wanted[Number(i)];
      if (one !== undefined) states.set(one, state);
    }
    return states;
  };
  const create = mysqlBatchCreator(locks, statements, readStates);

  /**
   * The take, in one transaction: the outcome of each acquire of `toTake` and `toCreate`, except
   * when the take won none of `toTake`, which are then left for a read after COMMIT (`lostAll`).
   */
  async function takeAll(
    run: TransactionStatement,
    toTake: readonly Wanted[],
    toCreate: readonly Wanted[],
  ): Promise<{ outcomes: Map<Wanted, AcquireOutcome>; lostAll: readonly Wanted[] }> {
    const outcomes = new Map<Wanted, AcquireOutcome>();
    const winners: Wanted[] = [];
    const missing = [...toCreate];
    let lostAll: readonly Wanted[] = [];
    if (toTake.length > 0) {
      const taken = Number((await run(takeSql(toTake.length), takeParameters(toTake))).numAffectedRows ?? 0n);
      if (taken === toTake.length) winners.push(...toTake);
      // Lost every row (the usual answer when replicas race for a tick): nothing was written, but
      // under REPEATABLE READ the take keeps its locks on the rows it read until COMMIT, and the next
      // slot's takes wait for them. So why each lost is read after COMMIT, by a plain read: a round
      // trip less holding them. (When it won some, which ones is read here, before COMMIT: the
      // rows are still this transaction's, so the answer cannot change.)
      else if (taken === 0) lostAll = toTake;
      else {
        const states = await readStates(run, toTake, true);
        for (const one of toTake) {
          const state = states.get(one);
          if (state === 'mine') winners.push(one);
          // A guard that expected the row free finds it deleted by hand: it creates it, as alone.
          else if (state === 'missing') missing.push(one);
          else outcomes.set(one, lossOf(state));
        }
      }
    }
    if (missing.length > 0) winners.push(...(await create(run, [...missing].sort(byName), outcomes)));
    if (history && winners.length > 0) await run(startSql(winners.length), startParameters(winners));
    for (const one of winners) outcomes.set(one, 'acquired');
    return { outcomes, lostAll };
  }

  return async (acquires) => {
    const wanted: Wanted[] = acquires.map(({ job, request }) => ({
      job,
      request,
      slot: request.slot === null ? null : mysqlTime(request.slot),
    }));
    const outcomes = new Map<Wanted, AcquireOutcome>();
    /** Each outcome from its row's state after a take: won (`mine`), lost and why, or no row. */
    const settle = async (ones: readonly Wanted[], states: ReadonlyMap<Wanted, RowState>): Promise<void> => {
      for (const one of ones) {
        const state = states.get(one);
        if (state === 'mine') outcomes.set(one, 'acquired');
        // Deleted by hand since the probe: created as alone, as the one-job path does.
        else if (state === 'missing') outcomes.set(one, await parts.acquireOne(one.job, { ...one.request, expectFree: false }));
        else outcomes.set(one, lossOf(state));
      }
    };
    // Those whose guard released the lock itself last time skip the probe, as alone.
    const toTake = wanted.filter(({ request }) => request.expectFree);
    const toCreate: Wanted[] = [];
    const toProbe = wanted.filter(({ request }) => !request.expectFree);
    if (toProbe.length > 0) {
      const states = await readStates(statements.run, toProbe, false);
      noteFireStep('probed', () => toProbe.map(({ job }) => job.name), toProbe[0]?.request.slot);
      for (const one of toProbe) {
        const state = states.get(one) ?? 'locked';
        if (state === 'free') toTake.push(one);
        else if (state === 'missing') toCreate.push(one);
        else outcomes.set(one, lossOf(state));
      }
    }
    const candidates = [...toTake, ...toCreate];
    const [only] = candidates;
    if (candidates.length === 1 && only !== undefined) {
      // One job looks free: the one-job take (one autocommit UPDATE, or the INSERT for a new row) costs less than a transaction.
      outcomes.set(only, await parts.acquireOne(only.job, { ...only.request, expectFree: toTake.includes(only) }));
    } else if (candidates.length > 1) {
      // Rows that all exist (every tick but a job's first): taken in one call of the take
      // procedure, where the tables have it; otherwise, or for new rows, the transaction below.
      const called = toCreate.length === 0 ? await parts.takeByCall(toTake) : undefined;
      if (called !== undefined) await settle(toTake, called);
      else {
        const taken = await statements.transaction((run) => takeAll(run, toTake, toCreate));
        for (const [one, outcome] of taken.outcomes) outcomes.set(one, outcome);
        if (taken.lostAll.length > 0) await settle(taken.lostAll, await readStates(statements.run, taken.lostAll, false));
      }
    }
    // Every job is answered above; one that somehow is not is a loss (fail closed).
    return wanted.map((one) => outcomes.get(one) ?? 'locked');
  };
}

/** What a lock row says about one acquire of a batch: `missing` (no row), `mine` (it holds this acquire's token). */
export type RowState = AcquireOutcome | 'free' | 'missing' | 'mine';

/** One acquire of a batch, with the values its statements bind. */
export interface Wanted {
  readonly job: ResolvedJob;
  readonly request: AcquireRequest;
  /** The slot as DATETIME(3) text in UTC, or null. */
  readonly slot: string | null;
}

/** The lockAtMostFor of an acquire, in microseconds. */
export const micros = ({ job }: Wanted): number => Math.round(job.lockAtMostForMs * 1_000);

/** A loser's outcome from its row's state: a row that looked free, or is not there, is held (fail closed). */
export function lossOf(state: RowState | undefined): AcquireOutcome {
  return state === 'paused' || state === 'slot-done' ? state : 'locked';
}

function isDuplicateKey(error: unknown): boolean {
  return (error as { errno?: unknown }).errno === DUPLICATE_KEY;
}

/**
 * The lock rows of a batch's new names (each job's first acquire anywhere), created in the batch's
 * transaction: the names it created, and in `outcomes` why the others lost. `locks` is the quoted
 * lock table; `readStates` says what each lock row says, read in the batch's transaction (a plain
 * read).
 */
function mysqlBatchCreator(
  locks: string,
  statements: LockStatements,
  readStates: (run: TransactionStatement, wanted: readonly Wanted[], withTokens: boolean) => Promise<Map<Wanted, RowState>>,
): (run: TransactionStatement, toCreate: readonly Wanted[], outcomes: Map<Wanted, AcquireOutcome>) => Promise<Wanted[]> {
  // The rows of names that have none (the jobs' first acquire anywhere), as the one-job path
  // creates one: a plain INSERT, never INSERT IGNORE, which would turn every error (a name too
  // long) into a warning. One statement for all, in name order (two replicas creating the same
  // names take their locks in the same order); if a concurrent creator has one of them, the
  // statement fails as a whole with a duplicate key and creates none (`create` then reads which exist).
  const createSql = perCount((count) =>
    statements.acquireText(`INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token, last_slot)
VALUES ${Array.from({ length: count }, () => '(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3), ?, ?, ?)').join(',\n       ')}`),
  );
  const createParameters = (wanted: readonly Wanted[]): unknown[] =>
    wanted.flatMap((one) => [one.job.name, micros(one), one.request.lockedBy, one.request.token, one.slot]);

  /**
   * Creates the rows of `toCreate`: those it created, and the outcomes of those it could not. A
   * duplicate key rolls back that one statement, not the transaction, and does not say which name
   * another creator has: one plain read then tells the names that exist now (losses) from those
   * still missing, which are tried again together, and each alone only after a second duplicate
   * key. Replicas racing to create the same new names (a job's first tick anywhere) thus cost a
   * loser one failed INSERT and one read, not one INSERT per name.
   */
  async function create(run: TransactionStatement, toCreate: readonly Wanted[], outcomes: Map<Wanted, AcquireOutcome>): Promise<Wanted[]> {
    if (await createTogether(run, toCreate)) return [...toCreate];
    // The names that failed together once: all of them, or those the read found still missing.
    let failed = toCreate;
    if (toCreate.length > 1) {
      const states = await readStates(run, toCreate, false);
      failed = toCreate.filter((one) => states.get(one) === 'missing');
      for (const one of toCreate) if (!failed.includes(one)) outcomes.set(one, lossOf(states.get(one)));
      if (failed.length === 0 || (await createTogether(run, failed))) return [...failed];
    }
    // Each name alone now (a single one was just tried alone), where a duplicate makes that name a
    // loss (a concurrent creator has it) and any other error still fails the batch. Rare: a
    // creator this transaction cannot see yet (it committed after this transaction's first read),
    // or several creators of overlapping names.
    const created: Wanted[] = [];
    const lost: Wanted[] = [];
    for (const one of failed) {
      if (failed.length > 1 && (await createTogether(run, [one]))) created.push(one);
      else lost.push(one);
    }
    // Why each lost (the creator may have paused it since, or run this slot); a row this
    // transaction cannot see yet (a creator that committed after its first read) is held.
    const states = lost.length === 0 ? new Map<Wanted, RowState>() : await readStates(run, lost, false);
    for (const one of lost) outcomes.set(one, lossOf(states.get(one)));
    return created;
  }

  /** Inserts the rows of `wanted` in one statement: false when a name already has one (and none was inserted). */
  async function createTogether(run: TransactionStatement, wanted: readonly Wanted[]): Promise<boolean> {
    try {
      await run(createSql(wanted.length), createParameters(wanted));
      return true;
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      return false;
    }
  }

  return create;
}
