// One process of the contention figure: `contenders` guards (each its own pool) race for every
// (job, slot) lock in the same order as the other processes. argv: url prefix names slots contenders
import { createGuard } from '../../src/index.js';

const [url, prefix, namesArg, slotsArg, contendersArg] = process.argv.slice(2);
if (url === undefined || prefix === undefined) throw new Error('usage: contention-worker url prefix names slots contenders');
const names = Number(namesArg);
const slots = Number(slotsArg);
const quiet = { warn: () => undefined, error: () => undefined };
const guards = Array.from({ length: Number(contendersArg) }, () =>
  createGuard({ database: url, tablePrefix: prefix, logger: quiet, telemetry: false }),
);

process.once('message', () => {
  void (async () => {
    const wins: string[] = [];
    let decisions = 0;
    let errors = 0;
    const started = performance.now();
    for (let slot = 0; slot < slots; slot += 1) {
      for (let name = 0; name < names; name += 1) {
        // Each (job, slot) is its own lock, held an hour: exactly one contender of all may win it.
        const job = { name: `job-${name}-slot-${slot}`, lockAtMostFor: '1h', lockAtLeastFor: '1h' };
        const results = await Promise.all(guards.map((guard) => guard.run(job, () => undefined)));
        for (const result of results) {
          decisions += 1;
          if (result.executed) wins.push(job.name);
          else if (result.reason === 'error') errors += 1;
        }
      }
    }
    const seconds = (performance.now() - started) / 1_000;
    await Promise.all(guards.map((guard) => guard.close()));
    process.send?.({ type: 'done', wins, decisions, errors, seconds }, () => process.disconnect());
  })();
});
process.send?.({ type: 'ready' });
