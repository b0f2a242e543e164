import type { AcquireOutcome, BatchedAcquire } from '../../core/dialect.js';
import { noteFireStep } from '../../core/fire-timeline.js';
import {
  type BatchAbandonValues,
  type BatchLossValues,
  type BatchProbeValues,
  type BatchStartValues,
  type BatchTakeValues,
  type SqliteRunner,
  type TransactionBody,
  call,
  NOW,
  plusSeconds,
  statement,
} from './statements.js';

/** One job of a batch, as the JSON element its statements read with json_each. */
interface RequestElement {
  readonly name: string;
  readonly token: string;
  readonly slot: string | null;
  readonly lockAtMostFor: string;
}

/** A winner's run row, as the JSON element the start statement reads. */
interface WinnerElement {
  readonly name: string;
  readonly token: string;
  readonly slot: string | null;
  readonly startedAt: string;
  readonly lockUntil: string;
  readonly lockAtMostForMs: number;
}

/**
 * `LockStore.acquireMany` on SQLite: the acquires of one tick as one probe for all of them (those
 * that skip it aside, read outside any transaction, as alone) and then, for all that look free, one
 * BEGIN IMMEDIATE transaction of a constant number of statements whatever the number of jobs: the
 * take (the one-job upsert over many rows), why each loser lost, the abandoned marking, the run
 * rows. The jobs are bound as one JSON text each statement reads with json_each: a bound value,
 * never SQL text, and one statement text (prepared once) for any N. Each job keeps its own
 * decision, token, run row, slot check and pause test; a loser writes nothing.
 *
 * What it shares with the one-job statements of lock-store.ts: `locks` and `runs`, the quoted lock
 * and run tables; `takeOnConflict`, the one-job take's `ON CONFLICT … DO UPDATE … WHERE` clause
 * (the same decision for every job); `pausedNow`, the pause test on the lock row's unqualified
 * columns (`0` before migration 004).
 */
export function batchAcquirer(
  runner: SqliteRunner,
  locks: string,
  runs: string,
  history: boolean,
  takeOnConflict: string,
  pausedNow: string,
): (acquires: readonly BatchedAcquire[]) => Promise<AcquireOutcome[]> {
  /** A field of a json_each element, as SQL text, integer or NULL (JSON null). */
  const field = (element: string, key: string) => `${element}.value ->> '$.${key}'`;

  // The probe for many jobs: the one-job probe's read, joined to the list of names (each on the
  // lock table's primary key). A name without a row looks free (the take inserts it). The
  // element's index (key) says whose answer each row is. Autocommit, no write lock: most attempts
  // lose, and this answers them without queueing for SQLite's one writer.
  const probeSql = statement<BatchProbeValues>(`SELECT r.key AS i,
       CASE WHEN l.name IS NULL THEN 'free' WHEN ${pausedNow} THEN 'paused' WHEN l.last_slot >= ${field('r', 'slot')} THEN 'slot-done'
            WHEN l.lock_until > ${NOW} THEN 'locked' ELSE 'free' END AS state
  FROM json_each(:requests) AS r LEFT JOIN ${locks} AS l ON l.name = ${field('r', 'name')}`);

  // The take for many jobs: the one-job upsert (the same ON CONFLICT clause, so the same decision
  // for each row), its VALUES row replaced by one row per element. Inside BEGIN IMMEDIATE SQLite
  // has one writer, so each row's check and write are one atomic step, as alone; a row whose
  // DO UPDATE condition is false is left unwritten (a loser writes nothing). 'now' is read once for
  // the whole statement: every job of the batch is taken at the same instant. RETURNING yields
  // the winners only. `WHERE true`: SQLite's parser needs a WHERE before ON CONFLICT in
  // INSERT … SELECT, or it reads ON as a join's.
  const takeSql = statement<BatchTakeValues>(`INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token, last_slot)
SELECT ${field('r', 'name')}, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${field('r', 'lockAtMostFor')}), ${NOW}, :lockedBy,
       ${field('r', 'token')}, ${field('r', 'slot')}
  FROM json_each(:requests) AS r WHERE true
${takeOnConflict}
RETURNING name, lock_until, locked_at, previous_token`);

  // Why each loser lost, read in the same transaction (the rows the take saw), as the one-job
  // loss read; a loser whose row is gone is answered 'locked', as alone.
  const lossSql = statement<BatchLossValues>(`SELECT r.key AS i,
       CASE WHEN ${pausedNow} THEN 'paused' WHEN l.last_slot >= ${field('r', 'slot')} THEN 'slot-done' ELSE 'locked' END AS outcome
  FROM json_each(:losers) AS r JOIN ${locks} AS l ON l.name = ${field('r', 'name')}`);

  // The runs the winners took over from that never released (their process died or overran);
  // each id on the run table's primary key.
  const abandonSql = statement<BatchAbandonValues>(
    `UPDATE ${runs} SET status = 'abandoned' WHERE id IN (SELECT value FROM json_each(:previousTokens)) AND status = 'running'`,
  );

  // The winners' run rows, each as the one-job start writes it: id = token, started when its lock
  // was taken and until the lock's expiry, by the values the take returned.
  const startSql =
    statement<BatchStartValues>(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
SELECT ${field('w', 'token')}, ${field('w', 'name')}, ${field('w', 'slot')}, 'running', :lockedBy, ${field('w', 'startedAt')},
       ${field('w', 'lockAtMostForMs')}, ${field('w', 'lockUntil')}
  FROM json_each(:winners) AS w`);

  /** The take and what follows it, in one BEGIN IMMEDIATE transaction. */
  function* take(toTake: readonly BatchedAcquire[], lockedBy: string): TransactionBody<Map<string, AcquireOutcome>> {
    const outcomes = new Map<string, AcquireOutcome>();
    const requests: RequestElement[] = toTake.map(({ job, request }) => ({
      name: job.name,
      token: request.token,
      slot: request.slot === null ? null : request.slot.toISOString(),
      lockAtMostFor: plusSeconds(job.lockAtMostForMs),
    }));
    const taken = yield call(takeSql, { requests: JSON.stringify(requests), lockedBy });
    const won = new Map(
      (taken.rows as { name: string; lock_until: string; locked_at: string; previous_token: string | null }[]).map((row) => [
        row.name,
        row,
      ]),
    );
    // A loser that came through the probe without a slot is answered 'locked' without a read, as alone.
    const losers = requests.filter(
      ({ name, slot }, index) => !won.has(name) && (slot !== null || toTake[index]?.request.expectFree === true),
    );
    for (const { name } of requests) if (!won.has(name)) outcomes.set(name, 'locked');
    if (losers.length > 0) {
      const loss = yield call(lossSql, { losers: JSON.stringify(losers) });
      for (const { i, outcome } of loss.rows as { i: number; outcome: AcquireOutcome }[]) {
        const loser = losers[i];
        if (loser !== undefined) outcomes.set(loser.name, outcome);
      }
    }
    for (const name of won.keys()) outcomes.set(name, 'acquired');
    if (!history || won.size === 0) return outcomes;
    const previousTokens = [...won.values()].flatMap(({ previous_token }) => (previous_token === null ? [] : [previous_token]));
    if (previousTokens.length > 0) yield call(abandonSql, { previousTokens: JSON.stringify(previousTokens) });
    const winners: WinnerElement[] = toTake.flatMap(({ job, request }, index) => {
      const row = won.get(job.name);
      const slot = requests[index]?.slot ?? null;
      return row === undefined
        ? []
        : [
            {
              name: job.name,
              token: request.token,
              slot,
              startedAt: row.locked_at,
              lockUntil: row.lock_until,
              lockAtMostForMs: job.lockAtMostForMs,
            },
          ];
    });
    yield call(startSql, { winners: JSON.stringify(winners), lockedBy });
    return outcomes;
  }

  return async (acquires) => {
    const [first] = acquires;
    if (first === undefined) return [];
    // One lockedBy is bound for the whole batch (it stays a plain bound text, never JSON, exactly
    // as alone). A guard gives all its acquires its own; a batch that mixes them is refused before
    // it sends anything, and the guard then sends each acquire alone.
    const lockedBy = first.request.lockedBy;
    if (acquires.some(({ request }) => request.lockedBy !== lockedBy)) {
      throw new Error('cronguard: a SQLite batch of acquires takes one lockedBy; these go alone');
    }
    const outcomes = new Map<string, AcquireOutcome>();
    // Those whose guard released the lock itself last time skip the probe, as alone.
    const toTake = acquires.filter(({ request }) => request.expectFree);
    const toProbe = acquires.filter(({ request }) => !request.expectFree);
    if (toProbe.length > 0) {
      const requests = toProbe.map(({ job, request }) => ({
        name: job.name,
        slot: request.slot === null ? null : request.slot.toISOString(),
      }));
      const probe = await runner.execute(call(probeSql, { requests: JSON.stringify(requests) }));
      noteFireStep('probed', () => toProbe.map(({ job }) => job.name), toProbe[0]?.request.slot);
      for (const { i, state } of probe.rows as { i: number; state: AcquireOutcome | 'free' }[]) {
        const probed = toProbe[i];
        if (probed === undefined) continue;
        if (state === 'free') toTake.push(probed);
        else outcomes.set(probed.job.name, state);
      }
    }
    if (toTake.length > 0) {
      for (const [name, outcome] of await runner.transaction(() => take(toTake, lockedBy))) outcomes.set(name, outcome);
    }
    // Every job is answered above; one that somehow is not is a loss (fail closed).
    return acquires.map(({ job }) => outcomes.get(job.name) ?? 'locked');
  };
}
