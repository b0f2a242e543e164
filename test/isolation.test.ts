// PostgreSQL whose default_transaction_isolation is not READ COMMITTED (set on the database, as an
// operator may): the lock statements must behave as under the default. Racing OS processes.
import { describe, expect, inject, it } from 'vitest';
import { guardOn } from './support/guards.js';
import { uniquePrefix } from './support/dialects.js';
import { startWorker } from './support/processes.js';
import { openRaw } from './support/raw-database.js';
import { refusalExplained, type RoundResult } from './support/race-rounds.js';

type RaceMessage = { type: 'ready' } | { type: 'done'; results: RoundResult[]; errors: string[] };

const PROCESSES = 4;
const ROUNDS = 20;
const INTERVAL_MS = 300;
// Each round is a slot: the slot watermark makes one run per round whatever the load on this
// machine delays (a process that reaches the lock late finds the slot done, not the lock free).
const LOCK_AT_LEAST_FOR_MS = 0;

const serverUrl = inject('postgresUrl');

/** The server URL with another database name. */
function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

describe.skipIf(serverUrl === null).each(['repeatable read', 'serializable'])(
  'PostgreSQL with default_transaction_isolation = %s',
  (level) => {
    it(`gives exactly one execution per slot to ${PROCESSES} racing processes, with no error skips and no errors logged`, async () => {
      const admin = await openRaw('postgres', serverUrl ?? '');
      const database = `cg_${level.replace(' ', '_')}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
      await admin.exec(`CREATE DATABASE ${database}`);
      try {
        // The setting every new session of the database starts with, as ALTER ROLE … SET would.
        await admin.exec(`ALTER DATABASE ${database} SET default_transaction_isolation = '${level}'`);
        const url = withDatabase(serverUrl ?? '', database);
        const probe = await openRaw('postgres', url);
        expect(await probe.query('SHOW transaction_isolation')).toEqual([{ transaction_isolation: level }]);
        await probe.close();
        const prefix = uniquePrefix();
        const { guard } = guardOn(url, prefix);
        await guard.migrate();
        await guard.close();
        const workers = Array.from({ length: PROCESSES }, () =>
          startWorker<RaceMessage>('race-worker.ts', [
            url,
            prefix,
            String(ROUNDS),
            String(INTERVAL_MS),
            String(LOCK_AT_LEAST_FOR_MS),
            'slots',
          ]),
        );
        await Promise.all(workers.map((worker) => worker.next('ready')));
        const startAt = Date.now() + 300;
        for (const worker of workers) worker.send({ startAt });
        const reports = await Promise.all(workers.map((worker) => worker.next<Extract<RaceMessage, { type: 'done' }>>('done')));
        const all = reports.flatMap((report) => report.results);
        expect(all.filter((result) => !result.executed && result.reason !== 'locked' && result.reason !== 'slot-done')).toEqual([]);
        expect(reports.flatMap((report) => report.errors)).toEqual([]);
        for (let round = 0; round < ROUNDS; round += 1) {
          const contenders = all.filter((result) => result.round === round);
          // None won a slot only when every contender came so late that other rounds' winners
          // explain each refusal (the lock held, or a later slot taken first): a stalled machine.
          const overtaken = contenders.every((result) => !result.executed && refusalExplained(result, all));
          expect(
            contenders.filter((result) => result.executed),
            `round ${round}: ${JSON.stringify(all.filter((result) => Math.abs(result.round - round) <= 1))}`,
          ).toHaveLength(overtaken ? 0 : 1);
        }
      } finally {
        await admin.exec(`DROP DATABASE ${database} WITH (FORCE)`);
        await admin.close();
      }
    }, 120_000);
  },
);
