import type { BatchedRelease, RunOutcome } from '../../core/dialect.js';
import {
  type BatchFinishValues,
  type BatchReleaseValues,
  type SqliteRunner,
  type TransactionBody,
  call,
  NOW,
  plusSeconds,
  statement,
} from './statements.js';

/** A run row a release finishes, as the JSON element the finish statement reads. */
interface FinishElement {
  readonly token: string;
  readonly status: RunOutcome['status'];
  readonly error: string | null;
  /** 1 when its lock row matched its token, else 0: the run overran. */
  readonly released: number;
}

/**
 * `LockStore.releaseMany` on SQLite: the releases of one turn of the event loop in one BEGIN
 * IMMEDIATE transaction of a constant number of statements whatever the number of jobs (the lock
 * rows, then the run rows), each job matched by its own token, keeping its own lockAtLeastFor and
 * finishing its own run with its own outcome. The jobs are bound as one JSON text each statement
 * reads with json_each: a bound value, never SQL text, one statement text for any N.
 *
 * `locks`, `runs`: the quoted lock and run tables (lock-store.ts's); `history`: whether runs write
 * history rows.
 */
export function batchReleaser(
  runner: SqliteRunner,
  locks: string,
  runs: string,
  history: boolean,
): (releases: readonly BatchedRelease[]) => Promise<boolean[]> {
  // The one-job release (lock-store.ts) over many rows: matched by name and token only; keeps
  // each lock until its own locked_at + lockAtLeastFor; clearing the token makes a second release
  // match nothing. UPDATE … FROM joins each lock row to its element (on the primary key); a row
  // whose token no longer matches (the lock expired and someone took it) is not written.
  // RETURNING names the rows released (it may not name the FROM side's columns).
  const releaseSql = statement<BatchReleaseValues>(`UPDATE ${locks}
   SET lock_until = max(${NOW}, strftime('%Y-%m-%dT%H:%M:%fZ', locked_at, r.at_least)), token = NULL
  FROM (SELECT value ->> '$.name' AS release_name, value ->> '$.token' AS release_token, value ->> '$.lockAtLeastFor' AS at_least
          FROM json_each(:releases)) AS r
 WHERE ${locks}.name = r.release_name AND ${locks}.token = r.release_token
RETURNING name`);

  // The one-job finish over many run rows: each its own status, error and duration; overran when
  // its lock had expired by now or another execution had taken it (released = 0). A run already
  // finished is left alone.
  const finishSql = statement<BatchFinishValues>(`UPDATE ${runs}
   SET status = f.finish_status, finished_at = ${NOW}, error = f.finish_error,
       duration_ms = CAST(round((julianday('now') - julianday(started_at)) * 86400000) AS INTEGER),
       overran = (lock_until < ${NOW} OR f.released = 0)
  FROM (SELECT value ->> '$.token' AS finish_token, value ->> '$.status' AS finish_status, value ->> '$.error' AS finish_error,
               value ->> '$.released' AS released
          FROM json_each(:finishes)) AS f
 WHERE ${runs}.id = f.finish_token AND ${runs}.finished_at IS NULL`);

  function* release(releases: readonly BatchedRelease[]): TransactionBody<boolean[]> {
    const elements = releases.map(({ job, token }) => ({ name: job.name, token, lockAtLeastFor: plusSeconds(job.lockAtLeastForMs) }));
    const released = yield call(releaseSql, { releases: JSON.stringify(elements) });
    const names = new Set((released.rows as { name: string }[]).map(({ name }) => name));
    const answers = releases.map(({ job }) => names.has(job.name));
    if (history) {
      const finishes: FinishElement[] = releases.map(({ token, outcome }, index) => ({
        token,
        status: outcome.status,
        error: outcome.error,
        released: answers[index] === true ? 1 : 0,
      }));
      yield call(finishSql, { finishes: JSON.stringify(finishes) });
    }
    return answers;
  }

  return (releases) => runner.transaction(() => release(releases));
}
