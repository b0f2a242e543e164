import type { TableNames } from '../../core/dialect.js';
import { byName, micros, type RowState, type Wanted } from './batch-acquire.js';
import { isDeadlock } from './driver-errors.js';
import { takeProcedureName, takeStatesSql } from './schema.js';
import type { LockStatements } from './statements.js';

/** ER_SP_DOES_NOT_EXIST (tables not migrated to 006), ER_PROCACCESS_DENIED_ERROR (no EXECUTE grant). */
const PROCEDURE_UNAVAILABLE = new Set([1305, 1370]);
/** After the procedure was found unavailable, how long batches take their locks without it before trying it again. */
const UNAVAILABLE_RECHECK_MS = 60_000;

/**
 * The take of a batch in one round trip: one CALL of the take procedure (schema.ts) with
 * the batch as one JSON value. Answers each acquire's row state after the take (`mine`: won), or
 * undefined when the call cannot be made, so that the batch takes its locks with its four
 * statements instead: tables not migrated to 006 or no EXECUTE grant (then not tried again for a
 * minute), or acquires made under different `lockedBy` names (one guard's never are).
 * After a lost connection, and after an answer that does not give every acquire's state, the rows
 * are read back: a call that committed and lost only its answer keeps its wins. After an error the
 * server answered, it took nothing (the procedure rolled back): the error stands, and the guard
 * sends each acquire alone; but a deadlock that outlasted its attempts is a lost race, answered
 * from the rows read back.
 */
export function mysqlTakeCaller(
  tables: TableNames,
  history: boolean,
  statements: LockStatements,
): (wanted: readonly Wanted[]) => Promise<Map<Wanted, RowState> | undefined> {
  // The statement texts are the same for any number of jobs: prepared once per connection.
  const callSql = statements.acquireText(`CALL \`${takeProcedureName(tables)}\`(?, ?, ?)`);
  const statesSql = takeStatesSql(tables, '?');
  // After a lost connection, the read as a locking one (takeStatesSql): the call may still be
  // committing (its answer, the states, leaves before its COMMIT), and a plain read would see the
  // rows as before it and count its jobs lost, left locked until lockAtMostFor. The shared locks
  // wait for the rows the call has locked (all, once its answer has started); bounded by
  // innodb_lock_wait_timeout (connection.ts). A call lost before it reached its rows may still
  // commit after the read: its jobs are then lost, as before.
  const settledStatesSql = takeStatesSql(tables, '?', { locking: true });
  const statesOf = (wanted: readonly Wanted[], rows: readonly unknown[]): Map<Wanted, RowState> => {
    const states = new Map<Wanted, RowState>();
    for (const { i, state } of rows as { i: number | bigint | string; state: RowState }[]) {
      const one = wanted[Number(i) - 1];
      if (one !== undefined) states.set(one, state);
    }
    return states;
  };
  let unavailableUntil = Number.NEGATIVE_INFINITY;
  return async (unordered) => {
    // By name, as bytes: the locking read back locks its rows in the array's order, as the takes
    // (the procedure's loop, the batch UPDATE) lock theirs, so that it never waits in a circle.
    const wanted = [...unordered].sort(byName);
    const [first] = wanted;
    if (first === undefined || performance.now() < unavailableUntil) return undefined;
    const lockedBy = first.request.lockedBy;
    if (wanted.some(({ request }) => request.lockedBy !== lockedBy)) return undefined;
    // Names are well-formed text without NUL (job-options.ts): JSON carries them as they are.
    const requests = JSON.stringify(
      wanted.map((one) => ({
        n: one.job.name,
        t: one.request.token,
        ...(one.slot === null ? {} : { s: one.slot }),
        u: micros(one),
        m: Math.round(one.job.lockAtMostForMs),
      })),
    );
    // The rows' states read back on any connection: plain once the call has ended, else settledStatesSql.
    const readBack = async (readSql = statesSql): Promise<Map<Wanted, RowState>> =>
      statesOf(wanted, (await statements.run(readSql, [requests])).rows);
    let rows: unknown[];
    try {
      ({ rows } = await statements.call(callSql, [requests, lockedBy, history ? 1 : 0]));
    } catch (error) {
      if (PROCEDURE_UNAVAILABLE.has((error as { errno?: unknown }).errno as number)) {
        unavailableUntil = performance.now() + UNAVAILABLE_RECHECK_MS;
        return undefined;
      }
      // A deadlock that outlasted the attempts (driver-errors.ts): other sessions kept writing these
      // rows, the call took nothing; the rows say why each lost (a row still `free` here is one
      // whose winner's write this node has not applied yet: a loss too).
      if (isDeadlock(error)) return readBack().catch(() => Promise.reject(error));
      // Another error the server answered (a lock wait timeout, a refused row): the
      // procedure rolled back, nothing was taken. But a call whose connection dropped (mysql2
      // marks that error `fatal`) may have committed and lost only its answer: then its rows hold
      // this call's tokens, and those jobs are won, their run rows written. A locking read on
      // another connection tells, once the call has ended (the call is one transaction: all its
      // takes, or none). When none is this call's, it took nothing: the error stands, and each job goes alone.
      if ((error as { fatal?: unknown }).fatal !== true) throw error;
      const states = await readBack(settledStatesSql).catch(() => undefined);
      if (states === undefined || ![...states.values()].includes('mine')) throw error;
      return states;
    }
    // A CALL answers the rows of its SELECT, then its own status. An answer of another shape (a
    // driver or server that answers a CALL otherwise) would leave jobs this call took without a
    // state, counted lost while their rows hold this call's tokens (locked until lockAtMostFor,
    // the slot done on every replica): the rows are read back instead, as after a lost answer.
    const [answered] = rows;
    const states = statesOf(wanted, Array.isArray(answered) ? answered : []);
    if (states.size === wanted.length) return states;
    return readBack();
  };
}
