import type { BatchedRelease } from '../../core/dialect.js';
import {
  boundRows,
  byNameBytes,
  columnNameKey,
  marks,
  nameColumn,
  nameKey,
  padded,
  perRows,
  type BoundColumn,
  type LockStatements,
} from './statements.js';

/** What the batch release shares with the one-job statements of lock-store.ts. */
// Text columns of the derived table: converted to utf8mb4 whatever the connection's character set
// (through a Kysely instance passed in, they arrive as bytes).
const text = (alias: string): BoundColumn => ({ alias, value: 'CAST(? AS CHAR CHARACTER SET utf8mb4)' });
const releaseColumns: readonly BoundColumn[] = [
  nameColumn,
  // A token as bytes: compared with the token column byte for byte (tokens are ASCII), with no collation to mix.
  { alias: 'token', value: 'CAST(? AS BINARY)' },
  { alias: 'at_least_micros', value: 'CAST(? AS SIGNED)' },
  text('status'),
  text('error'),
];

/**
 * `LockStore.releaseMany` on MySQL/MariaDB: the releases of one turn of the event loop in one
 * transaction of four statements whatever their number (START TRANSACTION, the read of which locks
 * are still held, the release, COMMIT), each release matched by its own token, keeping its own
 * lockAtLeastFor and finishing its own run row with its own outcome, as `release` does alone.
 *
 * Why a read first, in a transaction: the release must answer per job whether it still held its
 * lock (false: the lock was lost), and MySQL has no RETURNING; one multi-table UPDATE's affected
 * count is a sum over the batch, and after it commits nothing on the rows tells a released lock
 * from a lost one (a released row may already have been taken again). The read locks the jobs'
 * lock rows (SELECT … FOR UPDATE, in name order, as every batch locks them), so the rows it found
 * holding this batch's tokens are exactly those the UPDATE then releases; the locks last until
 * COMMIT, two round trips later.
 *
 * `locks`, `runs`: the quoted lock and run tables (lock-store.ts's); `history`: whether runs write
 * history rows.
 */
export function mysqlBatchReleaser(
  statements: LockStatements,
  locks: string,
  runs: string,
  history: boolean,
): (releases: readonly BatchedRelease[]) => Promise<boolean[]> {
  // Which of the lock rows still hold this batch's tokens (a token is on one row only, so the two
  // IN lists match each row to its own release). Locked until COMMIT: nothing takes or releases
  // them between this read and the UPDATE. The lock row's primary key gives the name order.
  const heldSql = perRows(
    (count) => `SELECT name FROM ${locks} WHERE name IN (${marks(count)}) AND token IN (${marks(count)}) ORDER BY name FOR UPDATE`,
  );

  // The one-job release (lock-store.ts) for every release at once, driven by a derived table of
  // the releases (bound rows, statements.ts) so that each finds its own lock row (by name and
  // token: one it lost is not touched) and its own run row (by token, still unfinished: a run
  // already finished is left alone), either of which may be missing: a lost lock leaves the run
  // alone to finish as overran; a run row gone (deleted by hand, or no history) leaves the lock
  // alone to release. No assignment reads a column another one writes: MySQL does not order
  // multi-table assignments. UTC_TIMESTAMP(3) is one value for the statement. overran: the lock
  // had expired by now, or another execution had taken it.
  const releaseSql = perRows((count) =>
    history
      ? `UPDATE (${boundRows(releaseColumns, count)}) d
  LEFT JOIN ${runs} r ON r.id = d.token AND r.finished_at IS NULL
  LEFT JOIN ${locks} l ON l.name = d.name AND l.token = d.token
   SET l.lock_until = GREATEST(UTC_TIMESTAMP(3), l.locked_at + INTERVAL d.at_least_micros MICROSECOND), l.token = NULL,
       r.status = d.status, r.error = d.error, r.finished_at = UTC_TIMESTAMP(3),
       r.duration_ms = TIMESTAMPDIFF(MICROSECOND, r.started_at, UTC_TIMESTAMP(3)) DIV 1000,
       r.overran = (l.name IS NULL OR r.lock_until < UTC_TIMESTAMP(3))`
      : `UPDATE (${boundRows(releaseColumns, count)}) d
  JOIN ${locks} l ON l.name = d.name AND l.token = d.token
   SET l.lock_until = GREATEST(UTC_TIMESTAMP(3), l.locked_at + INTERVAL d.at_least_micros MICROSECOND), l.token = NULL`,
  );
  const byName = byNameBytes<BatchedRelease>(({ job }) => job.name);

  return async (releases) => {
    // In name order: the derived table's rows, and so the order the UPDATE meets the rows in.
    const sorted = [...releases].sort(byName);
    const held = await statements.transaction(async (run) => {
      const count = sorted.length;
      const { rows } = await run<{ name: unknown }>(heldSql(count), [
        ...padded(
          sorted.map(({ job }) => job.name),
          1,
          count,
        ),
        ...padded(
          sorted.map(({ token }) => token),
          1,
          count,
        ),
      ]);
      await run(
        releaseSql(count),
        padded(
          sorted.flatMap(({ job, token, outcome }) => [
            job.name,
            token,
            Math.round(job.lockAtLeastForMs * 1_000),
            outcome.status,
            outcome.error,
          ]),
          5,
          count,
        ),
      );
      return new Set(rows.map(({ name }) => columnNameKey(name)));
    });
    return releases.map(({ job }) => held.has(nameKey(job.name)));
  };
}
