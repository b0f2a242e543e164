// Scenario 9: jobs that throw what breaks naive error handling (text no database stores: NUL, lone
// surrogates, 10,000 emoji; values that cannot be turned into text: Object.create(null), a revoked
// Proxy, a throwing toString or message getter), many times, several jobs at once, on every
// dialect. Nothing a job throws may keep its lock held, leave its run unfinished, or change what
// `run` rejects with.
import { describe, it } from 'vitest';
import type { RunStatus } from '../../src/index.js';
import { dialectTargets } from '../support/dialects.js';
import { guardOn, migratedGuard } from '../support/guards.js';
import { HOSTILE_VALUES, isStorable, settle } from '../support/hostile-values.js';
import { scenario } from './support/scenario.js';

const ROUNDS = 50;
const FINAL: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled'];

describe.each(dialectTargets())('hostile job errors on $name', (target) => {
  it.skipIf(target.serverUrl === null)('never keep a lock held, a run unfinished, or the rejection changed', async () => {
    await scenario('hostile-job-errors', target.name, async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      // Another replica on the same tables checks that each lock is free right after its run rejected.
      const replica = guardOn(url, prefix).guard;
      const jobs = HOSTILE_VALUES.map((hostile, index) => ({
        hostile,
        job: { name: `hostile-${index}`, lockAtMostFor: '1m' },
      }));
      let runs = 0;
      let notRejected = 0;
      let notIdentical = 0;
      let held = 0;
      const started = performance.now();
      for (let round = 0; round < ROUNDS; round += 1) {
        // Every kind at once: the releases of several hostile runs overlap.
        await Promise.all(
          jobs.map(async ({ hostile, job }) => {
            const thrown = hostile.make();
            const settled = await settle(
              guard.run(job, () => {
                throw thrown;
              }),
            );
            runs += 1;
            if (!settled.rejected) notRejected += 1;
            else if (settled.value !== thrown) notIdentical += 1;
            const next = await replica.run(job, () => 'next');
            if (!next.executed) held += 1;
          }),
        );
      }
      const elapsedMs = performance.now() - started;
      let rows = 0;
      let notFinal = 0;
      let unstorable = 0;
      for (const { job } of jobs) {
        const { runs: records } = await guard.history({ job: job.name, limit: 1_000 });
        rows += records.length;
        notFinal += records.filter((record) => !FINAL.includes(record.status)).length;
        unstorable += records.filter((record) => record.status === 'failed' && !isStorable(record.error)).length;
      }
      return {
        done: `${HOSTILE_VALUES.length} kinds of thrown value × ${ROUNDS} rounds, all kinds at once, each followed by a run on another replica`,
        times: runs,
        lost: {
          'locks left held': held,
          'history rows not final': notFinal,
          'history rows missing': 2 * runs - rows,
          'error text not storable': unstorable,
          'rejections not identical to the thrown value': notIdentical,
          'runs that did not reject': notRejected,
        },
        figures: `${Math.round(elapsedMs / (2 * runs))} ms per run (hostile run + replica run)`,
      };
    });
  });
});
