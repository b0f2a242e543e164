// Concurrency claims, each with separate OS processes (child_process.fork), on every dialect.
import { describe } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn } from './support/guards.js';
import { startWorker } from './support/processes.js';
import { openRaw } from './support/raw-database.js';
import { refusalExplained, type RoundResult } from './support/race-rounds.js';

type RaceMessage = { type: 'ready' } | { type: 'done'; results: RoundResult[] };
type MigrateMessage = { type: 'ready' } | { type: 'done'; error: string | null };
type DeclareMessage = { type: 'ready' } | { type: 'done'; warnings: string[] };

const PROCESSES = 4;
const ROUNDS = 20;
const INTERVAL_MS = 800;
// Held past the straggler window of a round, released well before the next one: a contender may be
// up to 400 ms late to its round (a full run on 2 cores had one ~100 ms late when rounds were 300 ms
// apart and the lock held 200: the round's winner still held it when the next round began).
const LOCK_AT_LEAST_FOR_MS = 400;

// Each claim on the three dialects at once (each its own tables and processes), the cases' windows
// starting together once every process of every case is up.
describe('concurrency', () => {
  eachDialectAtOnce(
    `gives exactly one execution per round to ${PROCESSES} processes racing for ${ROUNDS} rounds`,
    async ({ target, expect, together }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      await guardOn(url, prefix).guard.migrate();
      const workers = Array.from({ length: PROCESSES }, () =>
        startWorker<RaceMessage>('race-worker.ts', [url, prefix, String(ROUNDS), String(INTERVAL_MS), String(LOCK_AT_LEAST_FOR_MS)]),
      );
      await Promise.all(workers.map((worker) => worker.next('ready')));
      await together();
      const startAt = Date.now() + 300;
      for (const worker of workers) worker.send({ startAt });
      const reports = await Promise.all(workers.map((worker) => worker.next<Extract<RaceMessage, { type: 'done' }>>('done')));
      const all = reports.flatMap((report) => report.results);

      expect(all.filter((r) => !r.executed && r.reason !== 'locked')).toEqual([]);
      for (let round = 0; round < ROUNDS; round += 1) {
        // In the order they ran (a stalled contender may have asked first and started last).
        const winners = all.filter((r) => r.round === round && r.executed).sort((x, y) => (x.start ?? 0) - (y.start ?? 0));
        // A round nobody won: every contender was refused while another round's winner held the
        // lock (a winner a stalled machine made late holds it lockAtLeastFor from then, or longer
        // while it runs).
        const heldOff = all.filter((r) => r.round === round).every((r) => !r.executed && refusalExplained(r, all, LOCK_AT_LEAST_FOR_MS));
        // A further win in a round: a contender whose take the server may have decided after the
        // previous winner's lockAtLeastFor had run out (the lock expired: nothing held it off), on
        // a stalled machine. Its take was decided before its body started; the previous lock was
        // taken after its winner asked. A win that started before that lock surely expired is a
        // double run (and the bodies may never overlap: checked below).
        const stragglers = winners.every(
          (winner, index) => index === 0 || (winner.start ?? 0) >= (winners[index - 1]?.at ?? Infinity) + LOCK_AT_LEAST_FOR_MS,
        );
        const expected = winners.length === 0 && heldOff ? 0 : winners.length > 1 && stragglers ? winners.length : 1;
        expect(winners, `round ${round}: ${JSON.stringify(all.filter((r) => r.round >= round - 1 && r.round <= round))}`).toHaveLength(
          expected,
        );
      }
      // No two executions overlapped in time.
      const runs = all.filter((r) => r.executed).sort((x, y) => (x.start ?? 0) - (y.start ?? 0));
      for (let i = 1; i < runs.length; i += 1) {
        expect(runs[i]?.start ?? 0).toBeGreaterThanOrEqual(runs[i - 1]?.end ?? Infinity);
      }
      // The wins are spread over processes: the race was a race.
      const winnersByProcess = reports.map((report) => report.results.filter((r) => r.executed).length);
      expect(winnersByProcess.filter((count) => count > 0).length).toBeGreaterThan(1);
    },
  );

  eachDialectAtOnce('lets 8 processes call migrate() at the same instant', async ({ target, expect, together }) => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const workers = Array.from({ length: 8 }, () => startWorker<MigrateMessage>('migrate-worker.ts', [url, prefix]));
    await Promise.all(workers.map((worker) => worker.next('ready')));
    await together();
    const startAt = Date.now() + 300;
    for (const worker of workers) worker.send({ startAt });
    const reports = await Promise.all(workers.map((worker) => worker.next<Extract<MigrateMessage, { type: 'done' }>>('done')));
    expect(reports.map((report) => report.error)).toEqual(Array(8).fill(null));
    const { guard } = guardOn(url, prefix);
    expect((await guard.run({ name: 'after-migrate', lockAtMostFor: '1m' }, () => 'ok')).executed).toBe(true);
  });

  // Each replica declares the schedules it was given in one turn as one statement (slot ledger);
  // given in different orders, such statements lock the same rows in different orders and
  // deadlock (PostgreSQL did, before they were sorted by name). Each process here gives them in
  // its own order, round after round from the same instant, without waiting for the last round.
  // What it shows is that every declaration lands, with no warning: a statement the server rolls
  // back as a deadlock is sent again (job-schedules.ts), so with the sort taken out it passed too,
  // with 30 rounds as with 10 (tried 2026-12-07). Ten rounds: the same claim, a third of the work.
  eachDialectAtOnce(
    'lets 3 processes declare the same 300 schedules at the same instant, each in its own order',
    async ({ target, expect, together }) => {
      const url = databaseUrl(target);
      const { guard, prefix } = guardOn(url, uniquePrefix());
      await guard.migrate();
      const jobs = 300;
      const rounds = 10;
      const workers = Array.from({ length: 3 }, (_, index) =>
        startWorker<DeclareMessage>('declare-worker.ts', [url, prefix, String(jobs), String(rounds), String(index)]),
      );
      await Promise.all(workers.map((worker) => worker.next('ready')));
      await together();
      const startAt = Date.now() + 500;
      for (const worker of workers) worker.send({ startAt });
      const reports = await Promise.all(workers.map((worker) => worker.next<Extract<DeclareMessage, { type: 'done' }>>('done')));
      // A deadlock, or any other failure of a declaration, is a warning.
      expect(reports.map((report) => report.warnings)).toEqual([[], [], []]);
      const raw = await openRaw(target.name, url);
      try {
        const rows = await raw.query<{ lock_at_most_for_ms: unknown }>(`SELECT lock_at_most_for_ms FROM ${prefix}jobs`);
        expect(rows).toHaveLength(jobs);
        // Each as one of the rounds declared it (a process's rounds may overtake each other on its pool).
        const declared = Array.from({ length: rounds }, (_, round) => (round + 1) * 60_000);
        expect(rows.filter((row) => !declared.includes(Number(row.lock_at_most_for_ms)))).toEqual([]);
      } finally {
        await raw.close();
      }
    },
  );
});
