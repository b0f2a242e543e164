// Scenario 2: the holder dies (SIGKILL) mid-job. The next acquisition after lockAtMostFor
// succeeds, within one tick of the expiry; the dead run is `abandoned`.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'vitest';
import { dialectTargets } from '../support/dialects.js';
import { migratedGuard } from '../support/guards.js';
import { startWorker } from '../support/processes.js';
import { scenario } from './support/scenario.js';

const CRASHES = 3;
const LOCK_AT_MOST_FOR_MS = 1_000;
/** The contender's scheduler: an attempt every 100 ms, on a fixed grid. */
const TICK_MS = 100;
/** The winning attempt's own time from its send to the database's now(), on a loaded machine. */
const STATEMENT_SLACK_MS = 50;

describe.each(dialectTargets())('a crashed holder on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    `is taken over within lockAtMostFor + one tick and recorded abandoned (${CRASHES} crashes)`,
    async () => {
      await scenario('crashed-holder', target.name, async () => {
        const { guard, url, prefix } = await migratedGuard(target);
        const lost = {
          'dead run not abandoned': 0,
          'taken over before lockAtMostFor': 0,
          'recovered later than lockAtMostFor + one tick': 0,
        };
        const recoveries: number[] = [];
        for (let crash = 0; crash < CRASHES; crash += 1) {
          const job = `crash-${crash}`;
          const doomed = startWorker<{ type: 'running' }>('hold-worker.ts', [url, prefix, job, String(LOCK_AT_MOST_FOR_MS)]);
          await doomed.next('running');
          doomed.child.kill('SIGKILL');
          await doomed.exited;
          // The contender ticks until it wins (bounded: 10 × lockAtMostFor).
          const firstTick = performance.now();
          for (let tick = 0; tick < (10 * LOCK_AT_MOST_FOR_MS) / TICK_MS; tick += 1) {
            await sleep(firstTick + tick * TICK_MS - performance.now());
            if ((await guard.run({ name: job, lockAtMostFor: '1m' }, () => undefined)).executed) break;
          }
          const runs = (await guard.history({ job })).runs;
          const dead = runs.find((run) => run.lockedBy.startsWith('doomed-'));
          const successor = runs.find((run) => !run.lockedBy.startsWith('doomed-'));
          if (dead?.status !== 'abandoned') lost['dead run not abandoned'] += 1;
          // Both on the database clock: the dead run's lock_until and the successor's started_at.
          const deadUntil = dead?.lockUntil?.getTime() ?? Number.NaN;
          const takenAt = successor?.startedAt.getTime() ?? Number.POSITIVE_INFINITY;
          if (takenAt < deadUntil) lost['taken over before lockAtMostFor'] += 1;
          if (!(takenAt - deadUntil <= TICK_MS + STATEMENT_SLACK_MS)) lost['recovered later than lockAtMostFor + one tick'] += 1;
          recoveries.push(takenAt - (dead?.startedAt.getTime() ?? Number.NaN));
        }
        return {
          done: `SIGKILL mid-job, lockAtMostFor ${LOCK_AT_MOST_FOR_MS} ms, contender every ${TICK_MS} ms`,
          times: CRASHES,
          lost,
          figures: `recovery (dead run's start to successor's start) ${recoveries.map((ms) => `${ms} ms`).join(', ')}; bound ${LOCK_AT_MOST_FOR_MS + TICK_MS} ms (+ ${STATEMENT_SLACK_MS} ms statement slack)`,
        };
      });
    },
  );
});
