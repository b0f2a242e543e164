import type { AcquireOutcome, AcquireRequest } from '../../core/dialect.js';
import type { ResolvedJob } from '../../core/job-options.js';
import { perCount } from './bound-rows.js';
import { DUPLICATE_KEY, type LockStatements, type TransactionStatement } from './statement-execution.js';

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

/** What the batch's creation of new rows needs from batch-acquire.ts. */
export interface BatchCreateParts {
  /** The quoted lock table. */
  readonly locks: string;
  readonly statements: LockStatements;
  /** What each lock row says, read in the batch's transaction (a plain read). */
  readStates(run: TransactionStatement, wanted: readonly Wanted[], withTokens: boolean): Promise<Map<Wanted, RowState>>;
}

/**
 * The lock rows of a batch's new names (each job's first acquire anywhere), created in the batch's
 * transaction: the names it created, and in `outcomes` why the others lost.
 */
export function mysqlBatchCreator(
  parts: BatchCreateParts,
): (run: TransactionStatement, toCreate: readonly Wanted[], outcomes: Map<Wanted, AcquireOutcome>) => Promise<Wanted[]> {
  const { locks, statements, readStates } = parts;

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
