import type { Kysely } from 'kysely';
import type pg from 'pg';
import { batchAcquirer } from './batch-acquire.js';
import { batchReleaser } from './batch-release.js';
import { isPostgresSerializationFailure as isSerializationFailure } from './driver-errors.js';
import { NOW_IN_MS, statementRunner, type AcquireValues, type ExtendValues, type ReleaseValues, type TriggerValues } from './statements.js';
import { namedStatement } from '../common/named-parameters.js';
import { quotedTable } from '../common/quote.js';
import type { AcquireOutcome, AcquireRequest, LockStore, LockStoreSettings, RunOutcome, TableNames } from '../../core/dialect.js';
import type { ResolvedJob } from '../../core/job-options.js';
import { MAX_TIMER_MS } from '../../core/timeout.js';

/** A statement with `:name` parameters, sent as `$n` (numbered once, when the store is built). */
const statement = <Values extends object>(text: string) => namedStatement<Values>(text, 'numbered');

/**
 * The PostgreSQL lock statements, built once per guard. A loss costs one read (the probe); a win
 * three statements: the probe, one that acquires and starts the run's history row, one that
 * releases and finishes it. A guard that released the job's lock itself last time skips the probe
 * (a loss is then the acquire, which writes nothing). Without history, the run-row parts of each
 * statement are left out, and such a guard takes the row with a plain UPDATE (a loss is then that
 * UPDATE, matching nothing, and the probe).
 */
export function createPostgresLockStore(
  db: Kysely<unknown>,
  tables: TableNames,
  { native, history, acquireTimeoutMs, operatorControls = true }: LockStoreSettings<pg.Pool>,
): LockStore {
  const { query, cancelAcquires } = statementRunner(db, native);
  const locks = quotedTable(tables, 'locks', '"');
  const runs = quotedTable(tables, 'runs', '"');
  const lockUntil = `now() + :lockAtMostForMs::double precision * interval '1 millisecond'`;
  // The server-side bound of a take: lock_timeout (:lockTimeout, acquireTimeout in ms), set by the statement
  // itself for its own transaction only (set_config's `true`; in autocommit that is this
  // statement). An uncorrelated scalar subquery is evaluated once, before the scan (a one-time
  // filter), so it is in force before the UPDATE waits for a row lock or the INSERT for another's
  // key. Cut there, the statement rolls back and takes nothing (55P03): a take whose client gave up
  // (acquireTimeout), shut down or exited never commits later with nobody to give it back. In the
  // statement rather than on the connection: it costs no round trip, it holds on a pool or Kysely
  // passed in and behind PgBouncer (which refuses unknown startup parameters), and it leaves the
  // guard's other statements alone (the migrator's advisory lock may rightly wait longer).
  const boundWait = `(SELECT set_config('lock_timeout', :lockTimeout::text, true)) IS NOT NULL`;

  // Acquire: a conditional UPDATE, then an INSERT … ON CONFLICT DO NOTHING that runs only when the
  // UPDATE took nothing. Not `INSERT … ON CONFLICT DO UPDATE … WHERE`: that form locks the
  // conflicting row even when its WHERE is false, so every losing replica writes WAL and waits for
  // a flush (561 µs against 76 µs here). A loser of this form takes no row lock, and the history
  // sub-statements below act only on `won`, so it writes nothing at all.
  // Races: a concurrent UPDATE re-checks `lock_until <= now()` on the row it waited for, and a
  // concurrent INSERT waits on the other's key and then does nothing. now() is the statement's
  // start in autocommit: the database's clock, never a replica's.
  // previous_token keeps the token of a holder that never released (a released row has none), so
  // that its run, still `running`, is marked `abandoned` by the same statement that took over.
  // last_slot is the slot watermark: a scheduled call (:slot) takes the row only when its slot is
  // newer than the last one that ran, so a replica whose timer or clock is late never runs a slot
  // twice, even when the first run has already released the lock. An unscheduled call (:slot null)
  // ignores it and leaves it as it is.
  // The EXISTS on `abandoned` is a one-time filter, checked before its join starts: a loser, and a
  // winner that took a released lock, never reach the runs table whatever the join's plan. The
  // connection's cached generic plan can scan runs (planned while runs was small and never
  // re-planned without an ANALYZE), and a scan grows with the history.
  // With history, the winner's run row: marks abandoned the run it took over from, if that one
  // never released, and starts its own.
  const startRunOf = (slot: string): string => `, abandoned AS (
  UPDATE ${runs} SET status = 'abandoned'
    FROM won WHERE ${runs}.id = won.previous_token AND ${runs}.status = 'running'
     AND EXISTS (SELECT 1 FROM won WHERE previous_token IS NOT NULL)
), started AS (
  INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
  SELECT :token, :name, ${slot}, 'running', :lockedBy, now(), :lockAtMostForMs, lock_until FROM won
)`;
  const startRun = startRunOf(':slot');
  // The operator's pause (guard.pause), read from the row the statement looks at anyway: no
  // extra statement, and for an unpaused job one more column test on that row. Checked in the
  // probe (a paused job's attempt stays one read that writes nothing) and in every take (the
  // probe only answers no; the take alone decides).
  // On tables before migration 004 (no pause columns) the statements name none of them.
  const notPaused = operatorControls ? `(paused_at IS NULL OR paused_until <= now())` : 'true';
  const pausedNow = operatorControls ? `paused_at IS NOT NULL AND (paused_until IS NULL OR paused_until > now())` : 'false';
  const acquireSql = statement<AcquireValues>(`WITH taken AS (
  UPDATE ${locks}
     SET previous_token = token, lock_until = ${lockUntil}, locked_at = ${NOW_IN_MS}, locked_by = :lockedBy, token = :token,
         last_slot = COALESCE(:slot, last_slot)
   WHERE ${boundWait} AND name = :name AND lock_until <= now() AND ${notPaused}
     AND (:slot::timestamptz IS NULL OR last_slot IS NULL OR last_slot < :slot)
  RETURNING lock_until, previous_token
), inserted AS (
  INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token, last_slot)
  SELECT :name, ${lockUntil}, ${NOW_IN_MS}, :lockedBy, :token, :slot
   WHERE NOT EXISTS (SELECT 1 FROM taken)
  ON CONFLICT (name) DO NOTHING
  RETURNING lock_until, previous_token
), won AS (
  SELECT lock_until, previous_token FROM taken UNION ALL SELECT lock_until, previous_token FROM inserted
)${history ? startRun : ''}
SELECT 'acquired' AS outcome FROM won
UNION ALL
SELECT CASE WHEN ${pausedNow} THEN 'paused' WHEN last_slot >= :slot THEN 'slot-done' ELSE 'locked' END
  FROM ${locks} WHERE name = :name AND NOT EXISTS (SELECT 1 FROM won)`);
  // The last branch only reads, for a loser: why it lost. It sees the row as the statement began.

  // The probe: a plain read of the lock row before the acquire. Most attempts lose (every replica
  // but one, at every slot), and this answers them with one indexed read: no row lock, no WAL, and
  // none of the acquire's five parts. It only ever says no when the acquire would say no at that
  // instant (held, or this slot or a later one already ran); a lock that looks free still goes
  // through the acquire above, which alone decides, atomically.
  const probeSql = statement<
    Pick<AcquireValues, 'name' | 'slot'>
  >(`SELECT CASE WHEN ${pausedNow} THEN 'paused' WHEN last_slot >= :slot::timestamptz THEN 'slot-done'
              WHEN lock_until > now() THEN 'locked' ELSE 'free' END AS state
  FROM ${locks} WHERE name = :name`);

  // Acquire without history, for a guard that released the lock itself (the row exists): the
  // CTE's UPDATE alone. Without run rows to write, nothing needs the rest of the CTE, and a plain
  // conditional UPDATE takes the row with the same check. A loser is then asked why by the probe.
  const takeSql = statement<AcquireValues>(`UPDATE ${locks}
   SET previous_token = token, lock_until = ${lockUntil}, locked_at = ${NOW_IN_MS}, locked_by = :lockedBy, token = :token,
       last_slot = COALESCE(:slot, last_slot)
 WHERE ${boundWait} AND name = :name AND lock_until <= now() AND ${notPaused}
   AND (:slot::timestamptz IS NULL OR last_slot IS NULL OR last_slot < :slot)
RETURNING 1 AS taken`);

  // A manual run (guard.trigger): the take also requires the pending request's id and clears it,
  // so of all the replicas that saw the request exactly one runs it; the others match nothing and
  // write nothing. No slot (null in its run row): the watermark is left as it is (a manual
  // run neither moves it back nor uses up the next scheduled slot). Forced, it ignores the pause.
  // The row exists (the request is on it), so there is no INSERT branch; a loser is 'locked' and
  // asks again later.
  const triggerSqlOf = (force: boolean) =>
    statement<TriggerValues>(`WITH won AS (
  UPDATE ${locks}
     SET previous_token = token, lock_until = ${lockUntil}, locked_at = ${NOW_IN_MS}, locked_by = :lockedBy, token = :token, trigger_id = NULL
   WHERE ${boundWait} AND name = :name AND lock_until <= now() AND trigger_id = :triggerId${force ? '' : ` AND ${notPaused}`}
  RETURNING lock_until, previous_token
)${history ? startRunOf('NULL::timestamptz') : ''}
SELECT 'acquired' AS outcome FROM won`);
  const triggerSql = triggerSqlOf(false);
  const forcedTriggerSql = triggerSqlOf(true);

  // Release: matched by the execution's token, never by locked_by (two processes on one host
  // share a host name). Keeps the lock until locked_at + lockAtLeastFor; clearing the token makes
  // a second release match nothing and tells the next taker that nobody was left running.
  // The run is finished in the same statement. overran: the lock had expired by now (its
  // lock_until passed), or another execution had already taken it (no lock row matched). A run
  // already finished is left alone: a release retried after its first attempt committed unseen
  // (a lost reply) matches no lock row, and must not rewrite the run as overran.
  const finishRun = `, finished AS (
  UPDATE ${runs}
     SET status = :status, finished_at = now(), error = :error,
         duration_ms = round(extract(epoch FROM now() - started_at) * 1000),
         overran = lock_until < now() OR NOT EXISTS (SELECT 1 FROM released)
   WHERE id = :token AND finished_at IS NULL
)`;
  // Without history the UPDATE stands alone (no CTE to count through): ShedLock's release, token-matched.
  const releaseLock = `UPDATE ${locks}
     SET lock_until = GREATEST(${NOW_IN_MS}, locked_at + :lockAtLeastForMs::double precision * interval '1 millisecond'), token = NULL
   WHERE name = :name AND token = :token
  RETURNING 1 AS released`;
  const releaseSql = statement<ReleaseValues>(
    history ? `WITH released AS (\n  ${releaseLock}\n)${finishRun}\nSELECT count(*)::int AS released FROM released` : releaseLock,
  );

  // Extend: owner-checked by token and only while not expired, so that a holder whose lock has
  // lapsed can never revive it over a successor; GREATEST, so that an extend never shortens the
  // lock under a deadline the job already counts on. The run's lock_until follows, so that `overran`
  // compares with the extended expiry.
  const followRun = `, followed AS (
  UPDATE ${runs} SET lock_until = extended.lock_until FROM extended WHERE ${runs}.id = :token
)`;
  const extendLock = `UPDATE ${locks} SET lock_until = GREATEST(lock_until, now() + :durationMs::double precision * interval '1 millisecond')
   WHERE name = :name AND token = :token AND lock_until > now()
  RETURNING lock_until, 1 AS extended`;
  const extendSql = statement<ExtendValues>(
    history ? `WITH extended AS (\n  ${extendLock}\n)${followRun}\nSELECT count(*)::int AS extended FROM extended` : extendLock,
  );

  // A skipped execution, for those who asked (recordSkips). Not on the losing path by default:
  // a loser writes nothing.
  const skipSql = statement<
    Omit<AcquireValues, 'lockTimeout'>
  >(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, finished_at, duration_ms, lock_at_most_for_ms)
VALUES (:token, :name, :slot, 'skipped', :lockedBy, now(), now(), 0, :lockAtMostForMs)`);

  // lock_timeout in whole ms, from 1 (0 would turn the bound off) to its maximum, 2^31 - 1.
  const lockTimeout = String(Math.min(Math.max(Math.ceil(acquireTimeoutMs), 1), MAX_TIMER_MS));
  const acquireOutcome = async (values: AcquireValues): Promise<AcquireOutcome> =>
    (await query<{ outcome: AcquireOutcome }>(acquireSql.sql, acquireSql.parameters(values), { cancellable: true }))[0]?.outcome ??
    'locked';

  // The acquires of one tick together (core/acquire-batch.ts): the same statements over arrays.
  const acquireMany = batchAcquirer({
    query,
    locks,
    runs,
    history,
    boundWait,
    notPaused,
    pausedNow,
    lockTimeout,
    acquireOne: acquireOutcome,
  });

  const acquireOnce = async (job: ResolvedJob, { token, lockedBy, slot, expectFree, trigger }: AcquireRequest): Promise<AcquireOutcome> => {
    if (trigger !== undefined) {
      const take = trigger.force ? forcedTriggerSql : triggerSql;
      const values: TriggerValues = {
        name: job.name,
        lockAtMostForMs: job.lockAtMostForMs,
        lockedBy,
        token,
        lockTimeout,
        triggerId: trigger.id,
      };
      return (await query<{ outcome: AcquireOutcome }>(take.sql, take.parameters(values), { cancellable: true }))[0]?.outcome ?? 'locked';
    }
    const values: AcquireValues = {
      name: job.name,
      lockAtMostForMs: job.lockAtMostForMs,
      lockedBy,
      token,
      slot,
      lockTimeout,
    };
    if (expectFree) {
      if (history) return acquireOutcome(values);
      if ((await query(takeSql.sql, takeSql.parameters(values), { cancellable: true })).length === 1) return 'acquired';
      // The take lost: the probe says why, and a row it finds free (taken and released
      // meanwhile, or deleted by hand) goes through the full acquire.
    }
    const [probe] = await query<{ state: AcquireOutcome | 'free' }>(probeSql.sql, probeSql.parameters(values), {
      cancellable: true,
    });
    if (probe !== undefined && probe.state !== 'free') return probe.state;
    return acquireOutcome(values);
  };

  return {
    synchronous: false,
    async acquire(job: ResolvedJob, request: AcquireRequest): Promise<AcquireOutcome> {
      try {
        return await acquireOnce(job, request);
      } catch (error) {
        if (!isSerializationFailure(error)) throw error;
      }
      // A serialization failure (40001) only comes from a server or role whose
      // default_transaction_isolation is repeatable read or serializable: there a take that waited
      // for another's row or key fails rather than re-checking it as READ COMMITTED does. It rolled
      // back, so trying again is safe, and a fresh statement sees the committed winner and loses
      // cleanly ('locked' or 'slot-done'). Under serializable a failure can also be a false
      // positive (predicate locks on a shared index page), which the second attempt wins. A second
      // failure in a row is a loss too: some other execution is writing this row right now.
      try {
        return await acquireOnce(job, request);
      } catch (error) {
        if (isSerializationFailure(error)) return 'locked';
        throw error;
      }
    },
    acquireMany,
    // The releases that end in one turn together (core/acquire-batch.ts): the release over arrays.
    releaseMany: batchReleaser(query, locks, runs, history),
    async release(job: ResolvedJob, token: string, outcome: RunOutcome): Promise<boolean> {
      // Without history, :status and :error are not in the statement, nor in its parameters
      // (PostgreSQL cannot type a parameter it never sees).
      const values: ReleaseValues = {
        name: job.name,
        lockAtLeastForMs: job.lockAtLeastForMs,
        token,
        status: outcome.status,
        error: outcome.error,
      };
      const rows = await query<{ released: number }>(releaseSql.sql, releaseSql.parameters(values));
      return rows[0]?.released === 1;
    },
    async extend(job: ResolvedJob, token: string, durationMs: number): Promise<boolean> {
      const rows = await query<{ extended: number }>(extendSql.sql, extendSql.parameters({ name: job.name, durationMs, token }));
      return rows[0]?.extended === 1;
    },
    async recordSkip(job: ResolvedJob, { token, lockedBy, slot }: AcquireRequest): Promise<void> {
      await query(skipSql.sql, skipSql.parameters({ name: job.name, lockAtMostForMs: job.lockAtMostForMs, lockedBy, token, slot }));
    },
    ...(cancelAcquires === undefined ? {} : { cancelAcquires }),
  };
}
