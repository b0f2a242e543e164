import type { BatchedRelease } from '../../core/dialect.js';
import { namedStatement } from '../common/named-parameters.js';
import { NOW_IN_MS, type BatchReleaseValues, type StatementRunner } from './statements.js';

/**
 * `LockStore.releaseMany` on PostgreSQL: the releases that ended in one turn of the event loop as
 * one statement, the one-job release of lock-store.ts with each parameter an array (`unnest`), one
 * element per release: each lock matched by its own token and kept for its own lockAtLeastFor, each
 * run finished with its own outcome, each answered released or not (the lock was lost).
 *
 * `locks`, `runs`: the quoted lock and run tables (lock-store.ts's); `history`: whether runs write
 * history rows.
 */
export function batchReleaser(
  query: StatementRunner['query'],
  locks: string,
  runs: string,
  history: boolean,
): (releases: readonly BatchedRelease[]) => Promise<boolean[]> {
  // `mine` locks the rows still held by these tokens in name order before the UPDATE writes them:
  // the batch takes of batch-acquire.ts lock theirs in name order too, so a release and a take that
  // both want two rows (a holder that overran while another replica takes its expired lock) never
  // wait for each other in a circle. The UPDATE re-checks the token on each row's newest version, as
  // the one-job release does: a row taken over meanwhile matches nothing, and that release is false.
  // `finished` is the one-job release's run update: overran when the lock had expired by now, or
  // when no lock row matched (another execution took it); a run already finished is left alone (a
  // retry after a lost reply). Without history, the run part is left out.
  const finishRuns = `, finished AS (
  UPDATE ${runs}
     SET status = req.status, finished_at = now(), error = req.error,
         duration_ms = round(extract(epoch FROM now() - ${runs}.started_at) * 1000),
         overran = ${runs}.lock_until < now() OR NOT EXISTS (SELECT 1 FROM released WHERE released.name = req.name)
    FROM req WHERE ${runs}.id = req.token AND ${runs}.finished_at IS NULL
)`;
  const releaseSql = namedStatement<BatchReleaseValues>(
    `WITH req AS (
  SELECT * FROM unnest(:names::text[], :tokens::text[], :lockAtLeastForMs::double precision[], :statuses::text[], :errors::text[])
    WITH ORDINALITY AS r(name, token, at_least_ms, status, error, i)
), mine AS (
  SELECT l.name FROM ${locks} l JOIN req ON l.name = req.name AND l.token = req.token
   ORDER BY l.name
   FOR UPDATE OF l
), released AS (
  UPDATE ${locks} AS l
     SET lock_until = GREATEST(${NOW_IN_MS}, l.locked_at + req.at_least_ms * interval '1 millisecond'), token = NULL
    FROM req JOIN mine ON mine.name = req.name
   WHERE l.name = req.name AND l.token = req.token
  RETURNING l.name
)${history ? finishRuns : ''}
SELECT req.i::int AS i, EXISTS (SELECT 1 FROM released WHERE released.name = req.name) AS released FROM req`,
    'numbered',
  );

  return async (releases) => {
    const values: BatchReleaseValues = {
      names: releases.map(({ job }) => job.name),
      tokens: releases.map(({ token }) => token),
      lockAtLeastForMs: releases.map(({ job }) => job.lockAtLeastForMs),
      statuses: releases.map(({ outcome }) => outcome.status),
      errors: releases.map(({ outcome }) => outcome.error),
    };
    const rows = await query<{ i: number; released: boolean }>(releaseSql.sql, releaseSql.parameters(values));
    const answers = releases.map(() => false);
    for (const { i, released } of rows) answers[i - 1] = released;
    return answers;
  };
}
