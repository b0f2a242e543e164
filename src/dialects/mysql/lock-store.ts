import type { Kysely, QueryResult } from 'kysely';
import type { NamedStatement } from '../common/named-parameters.js';
import { quotedTable } from '../common/quote.js';
import type { AcquireOutcome, AcquireRequest, LockStore, LockStoreSettings, RunOutcome, TableNames } from '../../core/dialect.js';
import type { ResolvedJob } from '../../core/job-options.js';
import { mysqlBatchAcquirer, lossOf } from './batch-acquire.js';
import { mysqlBatchReleaser } from './batch-release.js';
import {
  DUPLICATE_KEY,
  lockStatements,
  statement,
  acquireStatement as registeredStatement,
  mysqlTime,
  type ExtendValues,
  type ReleaseValues,
  type SlotOfJob,
  type StartValues,
  type TakeValues,
  type TokenOfJob,
  type TriggerValues,
} from './statements.js';
import { isDeadlock, unlessConflicted } from './driver-errors.js';
import { mysqlTakeCaller } from './take-procedure-call.js';

/**
 * The MySQL/MariaDB lock statements, built once per guard. Valid on MySQL 8.0 and MariaDB 10.11.
 * A loss costs one read (the probe); a win four statements (the probe, take the lock, start the
 * run, release and finish it). A guard that released the job's lock itself takes first: its win is
 * three statements, its loss the take (matching nothing; it waits for the row lock, writes nothing)
 * and the probe.
 * Without history, a win neither starts nor finishes a run row: the probe, the take, the release.
 */
export function createMysqlLockStore(
  db: Kysely<unknown>,
  tables: TableNames,
  { history, operatorControls = true }: LockStoreSettings,
): LockStore {
  const locks = quotedTable(tables, 'locks', '`');
  const runs = quotedTable(tables, 'runs', '`');
  // How the statements reach the server (statements.ts): bound values, deadlock
  // victims sent again, the acquire's statements registered for the cancel at shutdown.
  const statements = lockStatements(db);
  const acquireStatement = <Values extends object>(text: string): NamedStatement<Values> => registeredStatement<Values>(statements, text);

  // The probe: a plain (consistent, lock-free) read of the lock row before the acquire. Most
  // attempts lose (every replica but one, at every slot), and this answers them without the
  // UPDATE's row lock, and with the reason (held, or this slot or a later one already ran). It only
  // says no when the acquire would at that instant; a lock that looks free still goes through the
  // UPDATE or INSERT below, which alone decide. No row: the job's first acquire anywhere.
  // The operator's pause (guard.pause) is read from the same row, in the probe and in the take:
  // a paused job's attempt stays one read that writes nothing, an unpaused one pays one column test.
  // On tables before migration 004 (no pause columns) the statements name none of them.
  const notPaused = operatorControls ? `(paused_at IS NULL OR paused_until <= UTC_TIMESTAMP(3))` : 'TRUE';
  const pausedNow = operatorControls ? `paused_at IS NOT NULL AND (paused_until IS NULL OR paused_until > UTC_TIMESTAMP(3))` : 'FALSE';
  const probeSql = acquireStatement<SlotOfJob>(`SELECT CASE WHEN ${pausedNow} THEN 'paused' WHEN last_slot >= :slot THEN 'slot-done'
              WHEN lock_until > UTC_TIMESTAMP(3) THEN 'locked' ELSE 'free' END AS state
  FROM ${locks} WHERE name = :name`);

  // Acquire, when the probe found the row free: one UPDATE that takes the row only when it has expired. MySQL has no
  // RETURNING, and an `INSERT … ON DUPLICATE KEY UPDATE` cannot tell a loser from an insert when
  // the connection has CLIENT_FOUND_ROWS (mysql2's default): both report 1 affected row. This
  // UPDATE reports 1 only for a winner in both modes, because a winner always changes the token.
  // UTC_TIMESTAMP(3) is fixed for the statement: the database's clock, in UTC.
  // previous_token is assigned first (single-table assignments run left to right), so it keeps the
  // token of a holder that never released (a released row has none).
  // last_slot is the slot watermark: a scheduled call takes the row only when its slot is newer
  // than the last one that ran, so a late replica never runs a slot twice; an unscheduled call
  // (slot NULL) ignores it and leaves it as it is.
  const takeSql = acquireStatement<TakeValues>(`UPDATE ${locks}
   SET previous_token = token, lock_until = UTC_TIMESTAMP(3) + INTERVAL :lockAtMostForMicros MICROSECOND,
       locked_at = UTC_TIMESTAMP(3), locked_by = :lockedBy, token = :token, last_slot = COALESCE(:slot, last_slot)
 WHERE name = :name AND lock_until <= UTC_TIMESTAMP(3) AND ${notPaused} AND (:slot IS NULL OR last_slot IS NULL OR last_slot < :slot)`);
  // For a scheduled loser of the take after the probe found the row free: why it lost. Unscheduled losers skip it.
  const lossSql = acquireStatement<SlotOfJob>(
    `SELECT CASE WHEN ${pausedNow} THEN 'paused' WHEN last_slot >= :slot THEN 'slot-done' ELSE 'locked' END AS outcome FROM ${locks} WHERE name = :name`,
  );
  // A manual run (guard.trigger): the take also requires the pending request's id and clears it
  // (assigned last, after the WHERE has matched it), so of all the replicas that saw the request
  // exactly one runs it. No slot: the watermark is left as it is. Forced, it ignores the pause.
  // A loser matches nothing, writes nothing, and asks again later.
  const triggerSqlOf = (force: boolean): NamedStatement<TriggerValues> =>
    acquireStatement<TriggerValues>(`UPDATE ${locks}
   SET previous_token = token, lock_until = UTC_TIMESTAMP(3) + INTERVAL :lockAtMostForMicros MICROSECOND,
       locked_at = UTC_TIMESTAMP(3), locked_by = :lockedBy, token = :token, trigger_id = NULL
 WHERE name = :name AND lock_until <= UTC_TIMESTAMP(3) AND trigger_id = :triggerId${force ? '' : ` AND ${notPaused}`}`);
  const triggerSql = triggerSqlOf(false);
  const forcedTriggerSql = triggerSqlOf(true);

  // Acquire, when the probe found no row: a plain INSERT, so that a concurrent creator gets a duplicate-key
  // error (a loss) while any other error (a name too long, a missing table) still surfaces.
  // Not INSERT IGNORE: it would turn those errors into warnings.
  const createSql = acquireStatement<TakeValues>(`INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token, last_slot)
VALUES (:name, UTC_TIMESTAMP(3) + INTERVAL :lockAtMostForMicros MICROSECOND, UTC_TIMESTAMP(3), :lockedBy, :token, :slot)`);

  // Start the run, copying its times from the lock row just taken (the database's clock), and in the
  // same statement mark `abandoned` the run it took over from, if that one is still `running`: the
  // second SELECT finds it and the duplicate key turns its insert into that update. MySQL has no
  // RETURNING and no multi-statement calls on a user's pool, so this is a second round trip; a
  // process dying between the two leaves no run row of its own, and doctor reports any run left
  // `running` after its lock expired. Cut by shutdown (or refused once it cancels), it fails, and
  // `start` gives the lock it just took back (abandonSql, abortSql: never cut).
  const startSql =
    acquireStatement<StartValues>(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
SELECT :token, name, :slot, 'running', locked_by, locked_at, :lockAtMostForMs, lock_until FROM ${locks} WHERE name = :name AND token = :token
UNION ALL
SELECT r.id, r.job_name, r.slot, r.status, r.locked_by, r.started_at, r.lock_at_most_for_ms, r.lock_until
  FROM ${runs} r JOIN ${locks} l ON r.id = l.previous_token
 WHERE l.name = :name AND l.token = :token AND r.status = 'running'
ON DUPLICATE KEY UPDATE status = 'abandoned'`);

  // Release and finish the run in one multi-table UPDATE. The lock is matched by token only
  // (LEFT JOIN: a lock taken by someone else leaves only the run to update). Both rows always
  // change (the token is cleared, the status leaves 'running'), so the affected count is 2 when
  // the lock was released and 1 when it was lost, with or without CLIENT_FOUND_ROWS. overran: the
  // lock had expired by now, or another execution had taken it. No assignment reads a column
  // another one writes: MySQL does not order multi-table assignments. A run already finished is
  // left alone: a release retried after its first attempt committed unseen (a lost reply) must
  // not rewrite it as overran; it then matches nothing here and falls to the lock-only release.
  const releaseSql = statement<ReleaseValues>(`UPDATE ${runs} r LEFT JOIN ${locks} l ON l.name = :name AND l.token = r.id
   SET l.lock_until = GREATEST(UTC_TIMESTAMP(3), l.locked_at + INTERVAL :lockAtLeastForMicros MICROSECOND), l.token = NULL,
       r.status = :status, r.error = :error, r.finished_at = UTC_TIMESTAMP(3),
       r.duration_ms = TIMESTAMPDIFF(MICROSECOND, r.started_at, UTC_TIMESTAMP(3)) DIV 1000,
       r.overran = (l.name IS NULL OR r.lock_until < UTC_TIMESTAMP(3))
 WHERE r.id = :token AND r.finished_at IS NULL`);

  // Extend: owner-checked by token and only while not expired, so that a lapsed holder can never
  // revive its lock over a successor; the run's lock_until follows (LEFT JOIN: a run row deleted by
  // hand, or never written without history, does not stop the lock from being extended).
  // GREATEST: an extend never shortens the lock. UTC_TIMESTAMP(3) is one value for the whole
  // statement, so both rows get the same expiry (no assignment reads a column another one writes:
  // MySQL does not order multi-table assignments). With CLIENT_FOUND_ROWS the count is positive
  // when the lock was extended and 0 when it was lost. Without it, an extend that moves nothing
  // (the lock already lasts longer) also counts 0: `heldSql` then tells the two apart.
  const extendSql = statement<ExtendValues>(`UPDATE ${locks} l LEFT JOIN ${runs} r ON r.id = l.token
   SET l.lock_until = GREATEST(l.lock_until, UTC_TIMESTAMP(3) + INTERVAL :durationMicros MICROSECOND),
       r.lock_until = GREATEST(r.lock_until, UTC_TIMESTAMP(3) + INTERVAL :durationMicros MICROSECOND)
 WHERE l.name = :name AND l.token = :token AND l.lock_until > UTC_TIMESTAMP(3)`);
  const heldSql = statement<TokenOfJob>(
    `SELECT 1 AS held FROM ${locks} WHERE name = :name AND token = :token AND lock_until > UTC_TIMESTAMP(3)`,
  );
  const skipSql = statement<
    StartValues & { readonly lockedBy: string }
  >(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, finished_at, duration_ms, lock_at_most_for_ms)
VALUES (:token, :name, :slot, 'skipped', :lockedBy, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), 0, :lockAtMostForMs)`);

  const execute = <Row, Values extends object>(named: NamedStatement<Values>, values: Values): Promise<QueryResult<Row>> =>
    statements.execute<Row, Values>(named, values);

  // Frees a lock whose run could not be started, so that a failed second statement does not hold
  // the job back for lockAtMostFor. The token goes back to the previous holder's, so that the next
  // taker still marks that run abandoned if it never released.
  const abortSql = statement<TokenOfJob>(
    `UPDATE ${locks} SET lock_until = locked_at, token = previous_token WHERE name = :name AND token = :token`,
  );
  // Releases the lock alone, for a run whose history row is gone (deleted by hand): the joined
  // release below is driven by that row and would leave the lock held until lockAtMostFor.
  const releaseLockOnlySql = statement<Omit<ReleaseValues, 'status' | 'error'>>(`UPDATE ${locks}
   SET lock_until = GREATEST(UTC_TIMESTAMP(3), locked_at + INTERVAL :lockAtLeastForMicros MICROSECOND), token = NULL
 WHERE name = :name AND token = :token`);

  // A start whose reply never came (the connection dropped after the INSERT committed) may have left
  // this execution's run row `running`, and the run it took over from unmarked: this marks both
  // `abandoned` (the job did not run; the other's lock had expired), matching them through the lock
  // row this execution still holds. Sent before the lock is given back, and the lock is given back
  // only once it succeeded: otherwise the row keeps this token, and the next taker (after
  // lockAtMostFor) marks the run abandoned through previous_token, as for a crashed holder.
  const abandonSql = statement<TokenOfJob>(`UPDATE ${runs} r JOIN ${locks} l ON l.name = :name AND l.token = :token
   SET r.status = 'abandoned'
 WHERE r.id IN (l.token, l.previous_token) AND r.status = 'running'`);

  // The take procedure's call (migration 006), for a batch and for a guard that released the lock
  // itself. Only on tables with the pause columns: the procedure reads them.
  const takeByCall = operatorControls ? mysqlTakeCaller(tables, history, statements) : () => Promise.resolve(undefined);

  async function start(job: ResolvedJob, token: string, slot: string | null): Promise<'acquired'> {
    if (!history) return 'acquired';
    try {
      await execute(startSql, { name: job.name, token, slot, lockAtMostForMs: Math.round(job.lockAtMostForMs) });
    } catch (error) {
      await execute(abandonSql, { name: job.name, token })
        .then(() => execute(abortSql, { name: job.name, token }))
        .catch(() => undefined);
      throw error;
    }
    return 'acquired';
  }

  async function loss(job: ResolvedJob, slot: string | null): Promise<AcquireOutcome> {
    if (slot === null) return 'locked';
    const result = await execute<{ outcome: AcquireOutcome }, SlotOfJob>(lossSql, { name: job.name, slot });
    return result.rows[0]?.outcome ?? 'locked';
  }

  const store: LockStore = {
    synchronous: false,
    async acquire(job: ResolvedJob, { token, lockedBy, slot, expectFree, trigger }: AcquireRequest): Promise<AcquireOutcome> {
      if (trigger !== undefined) {
        const values: TriggerValues = {
          name: job.name,
          lockAtMostForMicros: Math.round(job.lockAtMostForMs * 1_000),
          lockedBy,
          token,
          triggerId: trigger.id,
        };
        const taken = await unlessConflicted(execute(trigger.force ? forcedTriggerSql : triggerSql, values));
        return taken?.numAffectedRows === 1n ? start(job, token, null) : 'locked';
      }
      const slotText = slot === null ? null : mysqlTime(slot);
      const values: TakeValues = {
        name: job.name,
        lockAtMostForMicros: Math.round(job.lockAtMostForMs * 1_000),
        lockedBy,
        token,
        slot: slotText,
      };
      // A take (or a creation) that another session's write of the row keeps rolling back is lost (unlessConflicted).
      const take = async (): Promise<boolean> => (await unlessConflicted(execute(takeSql, values)))?.numAffectedRows === 1n;
      // A guard that released the lock itself takes first: the row most likely exists and is free.
      // With history, where the tables have the take procedure, the take and the run's start are
      // one call, which also answers why a loser lost (no probe after it); a row deleted by hand
      // goes on to the probe. Without history the take alone is one statement already.
      if (expectFree) {
        const one = { job, request: { token, lockedBy, slot, expectFree }, slot: slotText };
        const called = history ? await takeByCall([one]) : undefined;
        if (called === undefined) {
          if (await take()) return start(job, token, slotText);
        } else {
          const state = called.get(one);
          if (state === 'mine') return 'acquired';
          if (state !== undefined && state !== 'missing') return lossOf(state);
        }
      }
      // The probe, also after such a take lost: it says why, and finds a row deleted by hand.
      const [probe] = (await execute<{ state: AcquireOutcome | 'free' }, SlotOfJob>(probeSql, values)).rows;
      if (probe !== undefined && probe.state !== 'free') return probe.state;
      if (probe === undefined) {
        try {
          await execute(createSql, values);
        } catch (error) {
          if ((error as { errno?: unknown }).errno !== DUPLICATE_KEY && !isDeadlock(error)) throw error;
          return loss(job, slotText);
        }
        return start(job, token, slotText);
      }
      return (await take()) ? start(job, token, slotText) : loss(job, slotText);
    },
    async release(job: ResolvedJob, token: string, outcome: RunOutcome): Promise<boolean> {
      const values: ReleaseValues = {
        name: job.name,
        lockAtLeastForMicros: Math.round(job.lockAtLeastForMs * 1_000),
        token,
        status: outcome.status,
        error: outcome.error,
      };
      if (history) {
        const result = await execute(releaseSql, values);
        if (result.numAffectedRows !== 0n) return result.numAffectedRows === 2n;
      }
      // No history, or no run row: release the lock by itself (clearing the token changes the
      // row, so 1 means released with or without CLIENT_FOUND_ROWS).
      const released = await execute(releaseLockOnlySql, values);
      return released.numAffectedRows === 1n;
    },
    async extend(job: ResolvedJob, token: string, durationMs: number): Promise<boolean> {
      const result = await execute(extendSql, {
        name: job.name,
        token,
        durationMicros: Math.round(durationMs * 1_000),
      });
      if ((result.numAffectedRows ?? 0n) > 0n) return true;
      return (await execute(heldSql, { name: job.name, token })).rows.length === 1;
    },
    async recordSkip(job: ResolvedJob, { token, lockedBy, slot }: AcquireRequest): Promise<void> {
      const slotText = slot === null ? null : mysqlTime(slot);
      await execute(skipSql, {
        name: job.name,
        token,
        slot: slotText,
        lockedBy,
        lockAtMostForMs: Math.round(job.lockAtMostForMs),
      });
    },
    // A cut statement fails with ER_QUERY_INTERRUPTED (1317) and rolls back (one autocommit
    // statement): `acquire` rejects, which the guard, shutting down, reports as a GUARD_CLOSED skip.
    // The acquires and releases of one turn of the event loop (core/acquire-batch.ts), each in a
    // number of statements that does not grow with the number of jobs (batch-acquire.ts, batch-release.ts).
    acquireMany: mysqlBatchAcquirer({
      locks,
      runs,
      history,
      notPaused,
      pausedNow,
      statements,
      acquireOne: (job, request) => store.acquire(job, request),
      takeByCall,
    }),
    releaseMany: mysqlBatchReleaser(statements, locks, runs, history),
    ...(statements.cancelAcquires === undefined ? {} : { cancelAcquires: statements.cancelAcquires }),
  };
  return store;
}
