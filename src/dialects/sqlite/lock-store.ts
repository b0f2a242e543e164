import type { Kysely } from 'kysely';
import { quotedTable } from '../common/quote.js';
import type { AcquireOutcome, AcquireRequest, LockStore, LockStoreSettings, RunOutcome, TableNames } from '../../core/dialect.js';
import type { ResolvedJob } from '../../core/job-options.js';
import {
  kyselyRunner,
  nativeRunner,
  type LazySqliteDatabase,
  type SqliteRunner,
  type TransactionBody,
  type RunValues,
  type SlotOfJob,
  type TokenOfJob,
  call,
  NOW,
  plusSeconds,
  statement,
} from './statements.js';
import { batchAcquirer } from './batch-acquire.js';
import { batchReleaser } from './batch-release.js';

/**
 * The SQLite lock statements, built once per guard. An acquire and a release are each one short
 * transaction on the guard's single connection. BEGIN IMMEDIATE takes the write lock first:
 * a deferred transaction that reads and then writes fails with SQLITE_BUSY_SNAPSHOT, without
 * waiting, when another process wrote in between. Without history a take and a release are each
 * one statement, run in autocommit: a single write statement takes the write lock when it starts,
 * as BEGIN IMMEDIATE does, and is its own transaction.
 */
export function createSqliteLockStore(
  db: Kysely<unknown>,
  tables: TableNames,
  { native, history, operatorControls = true }: LockStoreSettings<LazySqliteDatabase>,
): LockStore {
  const locks = quotedTable(tables, 'locks', '"');
  const runs = quotedTable(tables, 'runs', '"');

  // Acquire: one upsert whose update applies only when the lock has expired. SQLite serialises
  // writers (the busy timeout makes a second process wait), so the check and the write are one
  // atomic step. 'now' is fixed for the statement and is the host's clock, which every process on
  // this host shares. RETURNING yields a row only for the winner, with the token of a holder that
  // never released (a released row has none). last_slot is the slot watermark: a scheduled call
  // takes the row only when its slot is newer than the last one that ran, so a late replica never
  // runs a slot twice; an unscheduled call (slot null) ignores it and leaves it as it is.
  // The batch take (batch-acquire.ts) ends with the same clause, for rows of many jobs.
  const takeOnConflict = `ON CONFLICT (name) DO UPDATE
   SET previous_token = token, lock_until = excluded.lock_until, locked_at = excluded.locked_at,
       locked_by = excluded.locked_by, token = excluded.token, last_slot = coalesce(excluded.last_slot, last_slot)
 WHERE lock_until <= excluded.locked_at AND ${operatorControls ? '(paused_at IS NULL OR paused_until <= excluded.locked_at)' : '1'}
   AND (excluded.last_slot IS NULL OR last_slot IS NULL OR last_slot < excluded.last_slot)`;
  const acquireSql = statement<
    SlotOfJob & TokenOfJob & { lockedBy: string; lockAtMostFor: string }
  >(`INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token, last_slot)
VALUES (:name, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', :lockAtMostFor), ${NOW}, :lockedBy, :token, :slot)
${takeOnConflict}
RETURNING lock_until, locked_at, previous_token`);
  // The operator's pause (guard.pause) is read from the same row, in the probe and in the take
  // above: a paused job's attempt stays one read outside any transaction, writing nothing.
  // On tables before migration 004 (no pause columns) the statements name none of them.
  const pausedNow = operatorControls ? `paused_at IS NOT NULL AND (paused_until IS NULL OR paused_until > ${NOW})` : '0';
  // A manual run (guard.trigger): the take also requires the pending request's id and clears it,
  // so of all the processes that saw the request exactly one runs it. No slot: the watermark is
  // left as it is. Forced, it ignores the pause. The row exists (the request is on it).
  const triggerSqlOf = (force: boolean) =>
    statement<TokenOfJob & { lockedBy: string; lockAtMostFor: string; triggerId: string }>(`UPDATE ${locks}
   SET previous_token = token, lock_until = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', :lockAtMostFor), locked_at = ${NOW},
       locked_by = :lockedBy, token = :token, trigger_id = NULL
 WHERE name = :name AND lock_until <= ${NOW} AND trigger_id = :triggerId${force ? '' : ` AND (paused_at IS NULL OR paused_until <= ${NOW})`}
RETURNING lock_until, locked_at, previous_token`);
  const triggerSql = triggerSqlOf(false);
  const forcedTriggerSql = triggerSqlOf(true);
  // The probe: a plain read of the lock row before the acquire's write transaction. Most attempts
  // lose, and this answers them without taking SQLite's one write lock, which every process on the
  // file would otherwise queue for. It only says no when the acquire would at that instant; a lock
  // that looks free still goes through the upsert, which alone decides.
  const probeSql =
    statement<SlotOfJob>(`SELECT CASE WHEN ${pausedNow} THEN 'paused' WHEN last_slot >= :slot THEN 'slot-done' WHEN lock_until > ${NOW} THEN 'locked' ELSE 'free' END AS state
  FROM ${locks} WHERE name = :name`);
  // For a loser: why it lost (read in the same transaction, so it is the row the upsert saw).
  const lossSql = statement<SlotOfJob>(
    `SELECT CASE WHEN ${pausedNow} THEN 'paused' WHEN last_slot >= :slot THEN 'slot-done' ELSE 'locked' END AS outcome FROM ${locks} WHERE name = :name`,
  );
  // The run the winner took over from never released: its process died or overran.
  const abandonSql = statement<{ previousToken: string }>(
    `UPDATE ${runs} SET status = 'abandoned' WHERE id = :previousToken AND status = 'running'`,
  );
  const startSql = statement<
    RunValues & { startedAt: string; lockUntil: string }
  >(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
VALUES (:token, :name, :slot, 'running', :lockedBy, :startedAt, :lockAtMostForMs, :lockUntil)`);

  // Release: matched by token only; keeps the lock until locked_at + lockAtLeastFor; clearing the
  // token makes a second release match nothing and tells the next taker nobody was left running.
  const releaseSql = statement<TokenOfJob & { lockAtLeastFor: string }>(`UPDATE ${locks}
   SET lock_until = max(${NOW}, strftime('%Y-%m-%dT%H:%M:%fZ', locked_at, :lockAtLeastFor)), token = NULL
 WHERE name = :name AND token = :token`);
  // overran: the lock had expired by now, or another execution had taken it (released = 0). A run
  // already finished is left alone (a second release of the same execution matches no lock row).
  const finishSql = statement<{
    token: string;
    status: RunOutcome['status'];
    error: string | null;
    released: number;
  }>(`UPDATE ${runs}
   SET status = :status, finished_at = ${NOW}, error = :error,
       duration_ms = CAST(round((julianday('now') - julianday(started_at)) * 86400000) AS INTEGER),
       overran = (lock_until < ${NOW} OR :released = 0)
 WHERE id = :token AND finished_at IS NULL`);
  // Extend: owner-checked by token and only while not expired, so that a lapsed holder can never
  // revive its lock over a successor; the run's lock_until follows.
  // max(): an extend never shortens the lock under a deadline the job already counts on.
  const extendSql = statement<
    TokenOfJob & { extendBy: string }
  >(`UPDATE ${locks} SET lock_until = max(lock_until, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', :extendBy))
 WHERE name = :name AND token = :token AND lock_until > ${NOW}
RETURNING lock_until`);
  const followSql = statement<{ token: string; lockUntil: string }>(`UPDATE ${runs} SET lock_until = :lockUntil WHERE id = :token`);
  const skipSql =
    statement<RunValues>(`INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, finished_at, duration_ms, lock_at_most_for_ms)
VALUES (:token, :name, :slot, 'skipped', :lockedBy, ${NOW}, ${NOW}, 0, :lockAtMostForMs)`);

  const runner = runnerFor(db, native);
  const transaction = <T>(body: () => TransactionBody<T>): Promise<T> => runner.transaction(body);

  return {
    synchronous: runner.synchronous,
    // The acquires (and releases) of one tick: one probe, then one transaction of a constant number
    // of statements for all the jobs that look free (batch-acquire.ts, batch-release.ts).
    acquireMany: batchAcquirer(runner, locks, runs, history, takeOnConflict, pausedNow),
    releaseMany: batchReleaser(runner, locks, runs, history),
    async acquire(job: ResolvedJob, { token, lockedBy, slot, expectFree, trigger }: AcquireRequest): Promise<AcquireOutcome> {
      const slotText = slot === null ? null : slot.toISOString();
      if (!expectFree && trigger === undefined) {
        const probe = (await runner.execute(call(probeSql, { name: job.name, slot: slotText }))).rows[0] as
          { state: AcquireOutcome | 'free' } | undefined;
        if (probe !== undefined && probe.state !== 'free') return probe.state;
      }
      if (!history && trigger === undefined) {
        // Without history the take is the upsert alone, one statement: its own transaction in
        // autocommit, so no BEGIN and COMMIT around it (two statements of the three, on a win).
        const taken = await runner.write(
          call(acquireSql, { name: job.name, lockAtMostFor: plusSeconds(job.lockAtMostForMs), lockedBy, token, slot: slotText }),
        );
        if (taken.rows[0] !== undefined) return 'acquired';
        if (slotText === null && !expectFree) return 'locked';
        // Why it lost, read just after rather than in the same transaction: the row may have moved
        // on in between (a release, a later slot), and the reason is then the row's newer state.
        const loss = await runner.execute(call(lossSql, { name: job.name, slot: slotText }));
        return (loss.rows[0] as { outcome: AcquireOutcome } | undefined)?.outcome ?? 'locked';
      }
      return transaction(function* (): TransactionBody<AcquireOutcome> {
        const lockAtMostFor = plusSeconds(job.lockAtMostForMs);
        const taken =
          trigger === undefined
            ? yield call(acquireSql, { name: job.name, lockAtMostFor, lockedBy, token, slot: slotText })
            : yield call(trigger.force ? forcedTriggerSql : triggerSql, {
                name: job.name,
                lockAtMostFor,
                lockedBy,
                token,
                triggerId: trigger.id,
              });
        const row = taken.rows[0] as { lock_until: string; locked_at: string; previous_token: string | null } | undefined;
        if (row === undefined) {
          // A manual run's loser asks again later; an unscheduled one that skipped the probe
          // (expectFree) reads why here, so that a pause is reported as such.
          if (trigger !== undefined || (slotText === null && !expectFree)) return 'locked';
          const loss = yield call(lossSql, { name: job.name, slot: slotText });
          return (loss.rows[0] as { outcome: AcquireOutcome } | undefined)?.outcome ?? 'locked';
        }
        if (!history) return 'acquired';
        if (row.previous_token !== null) yield call(abandonSql, { previousToken: row.previous_token });
        // The run starts when the lock was taken, by the same clock reading.
        yield call(startSql, {
          name: job.name,
          token,
          slot: slotText,
          lockedBy,
          startedAt: row.locked_at,
          lockAtMostForMs: job.lockAtMostForMs,
          lockUntil: row.lock_until,
        });
        return 'acquired';
      });
    },
    async release(job: ResolvedJob, token: string, outcome: RunOutcome): Promise<boolean> {
      // Without history the release is its one update, in autocommit (as the take above).
      if (!history) {
        const released = await runner.write(call(releaseSql, { name: job.name, token, lockAtLeastFor: plusSeconds(job.lockAtLeastForMs) }));
        return released.changes === 1;
      }
      return transaction(function* (): TransactionBody<boolean> {
        const released = yield call(releaseSql, {
          name: job.name,
          token,
          lockAtLeastFor: plusSeconds(job.lockAtLeastForMs),
        });
        if (history) yield call(finishSql, { token, status: outcome.status, error: outcome.error, released: released.changes });
        return released.changes === 1;
      });
    },
    extend(job: ResolvedJob, token: string, durationMs: number): Promise<boolean> {
      return transaction(function* (): TransactionBody<boolean> {
        const extended = yield call(extendSql, { name: job.name, token, extendBy: plusSeconds(durationMs) });
        const row = extended.rows[0] as { lock_until: string } | undefined;
        if (row === undefined) return false;
        if (history) yield call(followSql, { token, lockUntil: row.lock_until });
        return true;
      });
    },
    async recordSkip(job: ResolvedJob, { token, lockedBy, slot }: AcquireRequest): Promise<void> {
      const slotText = slot === null ? null : slot.toISOString();
      await runner.execute(call(skipSql, { name: job.name, token, slot: slotText, lockedBy, lockAtMostForMs: job.lockAtMostForMs }));
    },
  };
}

/**
 * better-sqlite3 directly when the guard has the database (a URL, or a `Database` passed in), with
 * statements prepared once; Kysely's connection for a Kysely instance passed in.
 */
function runnerFor(db: Kysely<unknown>, native: LazySqliteDatabase | undefined): SqliteRunner {
  return native === undefined ? kyselyRunner(db) : nativeRunner(() => native.get());
}
