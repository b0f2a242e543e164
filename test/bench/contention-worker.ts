// One process of the contention figure: `contenders` guards (each its own pool) race for every
// (job, slot) lock in the same order as the other processes. argv: url prefix names slots contenders tick
// One job at a time (tick '0'): each contender awaits one lock before the next. A tick at a time
// (tick '1'): every job of a slot at once, as node-cron fires the jobs due at one tick, so the
// guard sends them together (issue 19).
import { createGuard } from '../../src/index.js';

const [url, prefix, namesArg, slotsArg, contendersArg, tickArg] = process.argv.slice(2);
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
    const race = async (name: number, slot: number): Promise<void> => {
      // Each (job, slot) is its own lock, held an hour: exactly one contender of all may win it.
      const job = { name: `job-${name}-slot-${slot}`, lockAtMostFor: '1h', lockAtLeastFor: '1h' };
      const results = await Promise.all(guards.map((guard) => guard.run(job, () => undefined)));
      for (const result of results) {
        decisions += 1;
        if (result.executed) wins.push(job.name);
        else if (result.reason === 'error') errors += 1;
      }
    };
    const jobs = Array.from({ length: names }, (_, name) => name);
    for (let slot = 0; slot < slots; slot += 1) {
      if (tickArg === '1') await Promise.all(jobs.map((name) => race(name, slot)));
      else for (const name of jobs) await race(name, slot);
    }
    const seconds = (performance.now() - started) / 1_000;
    await Promise.all(guards.map((guard) => guard.close()));
    process.send?.({ type: 'done', wins, decisions, errors, seconds }, () => process.disconnect());
  })();
});
process.send?.({ type: 'ready' });
