// Scenario 7: an acquire that hangs on a lock another session holds is cut by acquireTimeout and
// skipped, the scheduler's next ticks do not pile more acquires behind it, and the job runs again
// once the lock is free.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'vitest';
import type { DialectName, RunResult } from '../../src/index.js';
import { dialectTargets } from '../support/dialects.js';
import { migratedGuard } from '../support/guards.js';
import { openRaw, type RawDatabase } from '../support/raw-database.js';
import { scenario } from './support/scenario.js';

const ACQUIRE_TIMEOUT_MS = 300;
const TICK_MS = 100;
const HELD_MS = 3_000;
const AFTER_MS = 1_000;
/**
 * How late past acquireTimeout a skip may settle on a loaded machine and still count as cut: an
 * acquire not cut waits for the holder, up to HELD_MS, so a second of slack still tells them apart.
 */
const SETTLE_SLACK_MS = 1_000;

/** Acquires of this table waiting in the server right now (not counting the session that asks). */
async function waitingAcquires(dialect: DialectName, observer: RawDatabase, prefix: string): Promise<number> {
  if (dialect === 'sqlite') return 0; // better-sqlite3 waits synchronously: not counted as a loss kind.
  const sql =
    dialect === 'postgres'
      ? `SELECT count(*) AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND query LIKE ?`
      : `SELECT count(*) AS n FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND command = 'Query' AND info LIKE ?`;
  const [row] = await observer.query<{ n: number | string }>(sql, [`%${prefix}locks%`]);
  return Number(row?.n ?? 0);
}

describe.each(dialectTargets())('a slow database on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    'cuts a hung acquire at acquireTimeout, piles nothing up, and runs once the lock is free',
    async () => {
      await scenario('slow-database', target.name, async () => {
        const { guard, url, prefix } = await migratedGuard(target, { acquireTimeout: ACQUIRE_TIMEOUT_MS });
        const job = { name: 'slow', lockAtMostFor: '1m' };
        await guard.run(job, () => undefined);
        const holder = await openRaw(target.name, url);
        const observer = await openRaw(target.name, url);
        if (target.name === 'sqlite') {
          await holder.exec('BEGIN IMMEDIATE');
        } else {
          await holder.exec(target.name === 'postgres' ? 'BEGIN' : 'START TRANSACTION');
          await holder.query(`SELECT * FROM ${prefix}locks FOR UPDATE`);
        }
        const heldUntil = performance.now() + HELD_MS;
        const ticks: { firedAt: number; settled: Promise<{ result: RunResult<void>; ms: number }> }[] = [];
        let maxWaiting = 0;
        let ranWhileHeld = 0;
        const end = heldUntil + AFTER_MS;
        let released = false;
        for (let at = performance.now(); at < end; at += TICK_MS) {
          await sleep(at - performance.now());
          if (!released && performance.now() >= heldUntil) {
            await holder.exec('COMMIT');
            released = true;
          }
          const firedAt = performance.now();
          const heldNow = !released;
          // A scheduler fires on time whether or not the last run has settled.
          const settled = guard
            .run(job, () => void (heldNow && performance.now() < heldUntil ? (ranWhileHeld += 1) : undefined))
            .then((result) => ({ result, ms: performance.now() - firedAt }));
          ticks.push({ firedAt, settled });
          maxWaiting = Math.max(maxWaiting, await waitingAcquires(target.name, observer, prefix));
        }
        if (!released) await holder.exec('COMMIT');
        const results = await Promise.all(ticks.map((tick) => tick.settled));
        await Promise.all([holder.close(), observer.close()]);
        const whileHeld = results.filter((_, index) => (ticks[index]?.firedAt ?? 0) < heldUntil);
        const afterwards = results.filter((_, index) => (ticks[index]?.firedAt ?? 0) >= heldUntil);
        const slowest = Math.max(...whileHeld.map((tick) => tick.ms));
        // ACQUIRE_TIMEOUT, or 'locked' for a tick that came while the first acquire was still within
        // its acquireTimeout (it is skipped without a second statement: it would lose to the first).
        // A tick fired just before the holder let go may also run: its take (sent anew once the server
        // cut the previous one at acquireTimeout, PostgreSQL's lock_timeout and MySQL's lock wait
        // timeout) can get the row right after the COMMIT. That is no loss as long as its job did not
        // start while the row was still held, which 'ran while held' counts.
        const expectedOutcome = whileHeld.filter(
          ({ result }) =>
            result.executed || result.reason === 'locked' || (result.reason === 'error' && result.error.code === 'ACQUIRE_TIMEOUT'),
        );
        return {
          done: `lock row held ${HELD_MS / 1_000} s by another session (SQLite: a write transaction), a tick every ${TICK_MS} ms, acquireTimeout ${ACQUIRE_TIMEOUT_MS} ms`,
          times: results.length,
          lost: {
            'tick not cut by acquireTimeout': whileHeld.filter((tick) => tick.ms > ACQUIRE_TIMEOUT_MS + SETTLE_SLACK_MS).length,
            'skip neither ACQUIRE_TIMEOUT nor locked': whileHeld.length - expectedOutcome.length,
            'ran while held': ranWhileHeld,
            // SQLite waits synchronously in the acquire itself: nothing can be left waiting there.
            ...(target.name === 'sqlite' ? {} : { 'acquires waiting at once beyond one': Math.max(0, maxWaiting - 1) }),
            'no run once free': afterwards.some(({ result }) => result.executed) ? 0 : 1,
          },
          figures: `${whileHeld.length} ticks while held, slowest settled in ${Math.round(slowest)} ms; at most ${maxWaiting} acquire(s) waiting in the server; ${afterwards.filter(({ result }) => result.executed).length} of ${afterwards.length} ticks ran after`,
        };
      });
    },
  );
});
