// `npm run demo`: three replicas of one app share a SQLite file and schedule the same job every
// second. Each slot runs once, on one of them. Prints who ran what, the run history, and a tally.
import { execFileSync, fork } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGuard } from 'cronguard';

const REPLICAS = 3;
const SECONDS = 10;
const here = fileURLToPath(new URL('.', import.meta.url));
const cwd = mkdtempSync(join(tmpdir(), 'cronguard-demo-'));
const database = `sqlite:${join(cwd, 'cronguard.sqlite')}`;

console.log(`Starting ${REPLICAS} replicas in ${cwd}, each scheduling "demo-report" every second for ${SECONDS} s…\n`);
const replicas = Array.from({ length: REPLICAS }, (_, index) =>
  fork(join(here, 'replica.ts'), [], {
    cwd,
    // The replicas run from a temporary folder: resolve tsx from here.
    execArgv: ['--import', import.meta.resolve('tsx')],
    env: { ...process.env, REPLICA_NAME: `replica-${index + 1}` },
  }),
);
await Promise.all(
  replicas.map(
    (child) =>
      new Promise((resolve, reject) => {
        child.once('message', resolve);
        child.once('exit', (code) => reject(new Error(`a replica exited with ${code} before it was ready`)));
      }),
  ),
);
// Every replica stops at the same instant, half a second after a slot (whose run has ended by
// then). The tally counts the slots from the first whole second after all were up to that one.
const windowStart = Math.ceil(Date.now() / 1_000) * 1_000;
const windowEnd = windowStart + (SECONDS - 1) * 1_000;
for (const child of replicas) child.send({ stopAt: windowEnd + 500 });
await Promise.all(replicas.map((child) => new Promise((resolve) => child.once('exit', resolve))));

const guard = createGuard({ database });
const { runs } = await guard.history({ job: 'demo-report', limit: 1_000 });
// The slot ledger: one outcome per slot the schedule implies in the window (missed: no replica ran it).
const [ledger] = await guard.slots({
  job: 'demo-report',
  since: new Date(windowStart),
  until: new Date(windowEnd + 1_000),
});
await guard.close();

console.log('\nThe run history (cronguard history):\n');
const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
process.stdout.write(execFileSync(process.execPath, [cli, 'history', '--database', database, '--limit', '20']));

// Duplicates are runs beyond the first of a slot: the history counts them (the ledger has one outcome per slot).
const bySlot = new Map<number, number>();
for (const run of runs) {
  const slot = run.slot?.getTime();
  if (slot !== undefined && slot >= windowStart && slot <= windowEnd) bySlot.set(slot, (bySlot.get(slot) ?? 0) + 1);
}
const executions = [...bySlot.values()].reduce((sum, count) => sum + count, 0);
const duplicates = [...bySlot.values()].reduce((sum, count) => sum + count - 1, 0);
const slots = ledger?.slots.length ?? 0;
const missed = ledger?.counts.missed ?? slots;
console.log(`\n${slots} slots, ${executions} runs, ${duplicates} duplicates, ${missed} missed`);
// Last, so it is what the reader sees: the command that shows this run in the web dashboard.
console.log(`\nSee these runs in the web dashboard (then open the URL it prints):\n  node ${cli} dashboard --database '${database}'`);
process.exitCode = duplicates === 0 && missed === 0 && slots >= 8 ? 0 : 1;
