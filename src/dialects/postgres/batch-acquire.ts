import type { AcquireOutcome, BatchedAcquire } from '../../core/dialect.js';
import { noteFireStep } from '../../core/fire-timeline.js';
import { namedStatement } from '../common/named-parameters.js';
import { NOW_IN_MS, type AcquireValues, type BatchProbeValues, type BatchTakeValues, type StatementRunner } from './statements.js';

/** What the batch statements share with the one-job statements of lock-store.ts. */
export interface BatchAcquireParts {
  readonly query: StatementRunner['query'];
  /** The quoted lock and run tables. */
  readonly locks: string;
  readonly runs: string;
  readonly history: boolean;
  /** The statement's own lock_timeout (a one-time filter), with its :lockTimeout parameter. */
  readonly boundWait: string;
  /** The pause tests on the lock row's unqualified columns (`true`/`false` before migration 004). */
  readonly notPaused: string;
  readonly pausedNow: string;
  readonly lockTimeout: string;
  /** The one-job acquire (lock-store.ts), for a batch of which only one job looks free. */
  acquireOne(values: AcquireValues): Promise<AcquireOutcome>;
}

/**
 * `LockStore.acquireMany` on PostgreSQL: the acquires of one tick as one probe for all of them
 * (those that skip it aside) and one take for all that look free, the one-job statements of
 * lock-store.ts with each parameter an array (`unnest`), one element per job. Each job keeps its
 * own decision, token, run row, slot check and pause test; a loser still writes nothing.
 */
export function batchAcquirer(parts: BatchAcquireParts): (acquires: readonly BatchedAcquire[]) => Promise<AcquireOutcome[]> {
  const { query, locks, runs, history, boundWait, notPaused, pausedNow, lockTimeout } = parts;
  const statement = <Values extends object>(text: string) => namedStatement<Values>(text, 'numbered');

  // The probe for many jobs: the one-job probe's read, joined to the list of names. A name
  // without a row looks free (the take inserts it). WITH ORDINALITY numbers the answers.
  const probeSql = statement<BatchProbeValues>(`SELECT r.i::int AS i,
       CASE WHEN l.name IS NULL THEN 'free' WHEN ${pausedNow} THEN 'paused' WHEN l.last_slot >= r.slot THEN 'slot-done'
            WHEN l.lock_until > now() THEN 'locked' ELSE 'free' END AS state
  FROM unnest(:names::text[], :slots::timestamptz[]) WITH ORDINALITY AS r(name, slot, i)
  LEFT JOIN ${locks} l ON l.name = r.name`);

  // The take for many jobs: the one-job acquire's CTE (a conditional UPDATE, an INSERT … ON
  // CONFLICT DO NOTHING for a row that does not exist, the run rows, then why each loser lost),
  // over the rows of `req`. The rows it takes are first locked in `free`, in name order: like a
  // one-job take, it waits for a row another session is writing at that instant (another take, a
  // late release, an operator's control) and then re-checks it on its newest version (taken by
  // the other: a loss; released, or the other rolled back: still free). Two batches that wanted
  // rows in different orders could each hold a row the other waits for (a deadlock, cut only
  // after deadlock_timeout); every batch locks its rows in the same order, so none waits in a
  // circle. `free` locks only rows the UPDATE then takes (a loser takes no row lock and writes
  // nothing; a row held by a live lock is not free on the statement's snapshot, so it is not
  // waited for), and the UPDATE re-checks each on its newest version. The INSERT covers only
  // names with no row at all, after the existing rows, in name order too: two replicas inserting
  // the same new names wait for each other in the same order.
  // The run rows: as in the one-job acquire, for every job won, with its own token and slot.
  const runRows = `, abandoned AS (
  UPDATE ${runs} SET status = 'abandoned'
    FROM won WHERE ${runs}.id = won.previous_token AND ${runs}.status = 'running'
     AND EXISTS (SELECT 1 FROM won WHERE previous_token IS NOT NULL)
), started AS (
  INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
  SELECT req.token, req.name, req.slot, 'running', req.locked_by, now(), req.at_most_ms, won.lock_until
    FROM won JOIN req ON req.name = won.name
)`;
  const slotIsNewer = `(req.slot IS NULL OR l.last_slot IS NULL OR l.last_slot < req.slot)`;
  const takeSql = statement<BatchTakeValues>(`WITH req AS (
  SELECT * FROM unnest(:names::text[], :tokens::text[], :slots::timestamptz[], :lockAtMostForMs::double precision[], :lockedBy::text[])
    AS r(name, token, slot, at_most_ms, locked_by)
), free AS (
  SELECT l.name FROM ${locks} l JOIN req ON l.name = req.name
   WHERE ${boundWait} AND l.lock_until <= now() AND ${notPaused} AND ${slotIsNewer}
   ORDER BY l.name
   FOR UPDATE OF l
), taken AS (
  UPDATE ${locks} AS l
     SET previous_token = l.token, lock_until = now() + req.at_most_ms * interval '1 millisecond', locked_at = ${NOW_IN_MS},
         locked_by = req.locked_by, token = req.token, last_slot = COALESCE(req.slot, l.last_slot)
    FROM req JOIN free ON free.name = req.name
   WHERE l.name = req.name AND l.lock_until <= now() AND ${notPaused} AND ${slotIsNewer}
  RETURNING l.name, l.lock_until, l.previous_token
), inserted AS (
  INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token, last_slot)
  SELECT req.name, now() + req.at_most_ms * interval '1 millisecond', ${NOW_IN_MS}, req.locked_by, req.token, req.slot
    FROM req
   WHERE ${boundWait} AND NOT EXISTS (SELECT 1 FROM ${locks} l WHERE l.name = req.name)
   ORDER BY req.name
  ON CONFLICT (name) DO NOTHING
  RETURNING name, lock_until, previous_token
), won AS (
  SELECT name, lock_until, previous_token FROM taken UNION ALL SELECT name, lock_until, previous_token FROM inserted
)${history ? runRows : ''}
SELECT req.name,
       CASE WHEN won.name IS NOT NULL THEN 'acquired' WHEN l.name IS NULL THEN 'locked' WHEN ${pausedNow} THEN 'paused'
            WHEN l.last_slot >= req.slot THEN 'slot-done' ELSE 'locked' END AS outcome
  FROM req LEFT JOIN won ON won.name = req.name LEFT JOIN ${locks} l ON l.name = req.name`);
  // The last SELECT reads the rows as the statement began: for a loser, why it lost.

  const oneJobValues = ({ job, request }: BatchedAcquire): AcquireValues => ({
    name: job.name,
    lockAtMostForMs: job.lockAtMostForMs,
    lockedBy: request.lockedBy,
    token: request.token,
    slot: request.slot,
    lockTimeout,
  });

  return async (acquires) => {
    const outcomes = new Map<string, AcquireOutcome>();
    // Those whose guard released the lock itself last time skip the probe, as alone.
    const toTake = acquires.filter(({ request }) => request.expectFree);
    const toProbe = acquires.filter(({ request }) => !request.expectFree);
    if (toProbe.length > 0) {
      const values: BatchProbeValues = { names: toProbe.map(({ job }) => job.name), slots: toProbe.map(({ request }) => request.slot) };
      const rows = await query<{ i: number; state: AcquireOutcome | 'free' }>(probeSql.sql, probeSql.parameters(values), {
        cancellable: true,
      });
      noteFireStep('probed', values.names, toProbe[0]?.request.slot);
      for (const { i, state } of rows) {
        const probed = toProbe[i - 1];
        if (probed === undefined) continue;
        if (state === 'free') toTake.push(probed);
        else outcomes.set(probed.job.name, state);
      }
    }
    const [first] = toTake;
    if (toTake.length === 1 && first !== undefined) {
      outcomes.set(first.job.name, await parts.acquireOne(oneJobValues(first)));
    } else if (toTake.length > 1) {
      const values: BatchTakeValues = {
        names: toTake.map(({ job }) => job.name),
        tokens: toTake.map(({ request }) => request.token),
        slots: toTake.map(({ request }) => request.slot),
        lockAtMostForMs: toTake.map(({ job }) => job.lockAtMostForMs),
        lockedBy: toTake.map(({ request }) => request.lockedBy),
        lockTimeout,
      };
      const rows = await query<{ name: string; outcome: AcquireOutcome }>(takeSql.sql, takeSql.parameters(values), { cancellable: true });
      for (const { name, outcome } of rows) outcomes.set(name, outcome);
    }
    // Every job is answered above; one that somehow is not is a loss (fail closed).
    return acquires.map(({ job }) => outcomes.get(job.name) ?? 'locked');
  };
}
