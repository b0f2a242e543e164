// Figure 8 in a process of its own, forked by `memoryGrowth` (figures.ts): plain JS on the built
// dist/, because tsx's loader runs a second V8 heap on a worker thread whose RSS comes and goes by
// tens of MB. Arguments: URL, then the run counts to read RSS at. Sends [{ runs, rssMb }].
import { setTimeout as delay } from 'node:timers/promises';
import { createGuard } from '../../dist/src/index.js';

const url = process.argv[2];
/** The run counts to read RSS at, ascending. */
const checkpoints = process.argv.slice(3).map(Number);
const guard = createGuard({
  database: url,
  tablePrefix: 'memory_',
  logger: { warn: () => undefined, error: () => undefined },
  telemetry: false,
});
await guard.migrate();
const job = { name: 'memory', lockAtMostFor: '1m' };
const noop = () => undefined;
// V8 returns the pages a GC freed on a background thread: RSS read right after gc() still counts
// some of them (±10 MB from one reading to the next). Collect and wait, twice.
async function rss() {
  for (let i = 0; i < 2; i += 1) {
    globalThis.gc();
    await delay(200);
  }
  return process.memoryUsage().rss / 1_048_576;
}
const readings = [];
let runs = 0;
for (const checkpoint of checkpoints) {
  for (; runs < checkpoint; runs += 1) await guard.run(job, noop);
  readings.push({ runs, rssMb: await rss() });
}
await guard.close();
process.send(readings);
