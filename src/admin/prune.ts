import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';

/** Rows deleted by one statement: short enough not to hold locks for long. */
export const PRUNE_BATCH_SIZE = 1_000;

/**
 * Deletes runs that started before `cutoff`, in batches of at most PRUNE_BATCH_SIZE, up to
 * `maxBatches` of them. Keeps the newest run of each job (so that "when did it last run" always has
 * an answer) and every `running` row (doctor reports those). Returns how many rows went.
 */
export function createPruner(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const runs = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  return async function prune(cutoff: Date, maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    const before = dialect.reads.timeParameter(cutoff);
    let deleted = 0;
    for (let batch = 0; batch < maxBatches; batch += 1) {
      // "Newer" orders like the history (started_at, then id), so that runs started in the same
      // millisecond still leave exactly one newest. A skip (recordSkips) is never the newer run
      // that lets a real one go: losers write theirs just after the winner starts, and the job's
      // newest real run must stay.
      // The ids are chosen in a derived table: MySQL refuses a DELETE whose subquery reads the
      // table it deletes from, and a LIMIT inside IN (…), unless the subquery is materialised.
      const result = await sql`DELETE FROM ${runs} WHERE id IN (
        SELECT id FROM (
          SELECT r.id FROM ${runs} r
           WHERE r.started_at < ${before} AND r.status <> 'running'
             AND EXISTS (SELECT 1 FROM ${runs} n WHERE n.job_name = r.job_name
                           AND (n.status <> 'skipped' OR r.status = 'skipped')
                           AND (n.started_at > r.started_at OR (n.started_at = r.started_at AND n.id > r.id)))
           LIMIT ${PRUNE_BATCH_SIZE}
        ) batch
      )`.execute(db);
      const count = Number(result.numAffectedRows ?? 0n);
      deleted += count;
      if (count < PRUNE_BATCH_SIZE) break;
    }
    return deleted;
  };
}
