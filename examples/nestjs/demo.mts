// `npm run demo:nestjs`: two replicas of the NestJS app in src/ (CommonJS, as Nest apps are built)
// share one database and run the same two @GuardedCron jobs. Each slot runs once, on one of them.
// Prints who ran what, then a tally per job. DATABASE_URL picks the database (default: a SQLite file
// in a temporary folder, which both replicas share).
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPLICAS = 2;
const SECONDS = 10;
const here = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const database = process.env['DATABASE_URL'] ?? `sqlite:${join(mkdtempSync(join(tmpdir(), 'cronguard-nest-demo-')), 'cronguard.sqlite')}`;

// The app imports 'cronguard' as an installed package: link this repository in (npm install would
// do the same from "cronguard": "file:../.."), then compile the app with tsc, as `nest build` does.
rmSync(join(here, 'node_modules', 'cronguard'), { force: true });
mkdirSync(join(here, 'node_modules'), { recursive: true });
symlinkSync(repoRoot, join(here, 'node_modules', 'cronguard'), 'dir');
console.log('Compiling the Nest app (tsc -p examples/nestjs)…');
execFileSync(join(repoRoot, 'node_modules', '.bin', 'tsc'), ['-p', join(here, 'tsconfig.json')], { stdio: 'inherit' });

console.log(
  `Starting ${REPLICAS} replicas of the Nest app on ${database.startsWith('sqlite:') ? 'a shared SQLite file' : database.replace(/\/\/[^@]*@/, '//…@')}…\n`,
);
const replicas: ChildProcess[] = Array.from({ length: REPLICAS }, (_, index) =>
  fork(join(here, 'dist', 'main.js'), [], {
    env: { ...process.env, DATABASE_URL: database, REPLICA_NAME: `replica-${index + 1}` },
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
// The tally counts the slots from the first whole second after both were up, for SECONDS seconds;
// then both get SIGTERM (Nest's shutdown hooks shut the guard down: runs in flight finish first).
const windowStart = Math.ceil(Date.now() / 1_000) * 1_000;
const windowEnd = windowStart + (SECONDS - 1) * 1_000;
await new Promise((resolve) => setTimeout(resolve, windowEnd + 2_500 - Date.now()));
for (const child of replicas) child.kill('SIGTERM');
await Promise.all(replicas.map((child) => new Promise((resolve) => child.once('exit', resolve))));

// The built package, as the app loads it (this folder's package.json stops a self-reference).
const { createGuard } = (await import(
  pathToFileURL(join(repoRoot, 'dist', 'src', 'index.js')).href
)) as typeof import('../../src/index.js');
const guard = createGuard({ database });
let failed = false;
console.log('');
for (const [job, everyMs] of [
  ['nest-demo.heartbeat', 1_000],
  ['nest-demo.digest', 5_000],
] as const) {
  const { runs } = await guard.history({ job, limit: 1_000 });
  const bySlot = new Map<number, string[]>();
  for (const run of runs) {
    const slot = run.slot?.getTime();
    if (slot !== undefined && run.status !== 'skipped') bySlot.set(slot, [...(bySlot.get(slot) ?? []), run.lockedBy]);
  }
  let slots = 0;
  let executions = 0;
  let duplicates = 0;
  let missed = 0;
  const winners = new Map<string, number>();
  for (let slot = Math.ceil(windowStart / everyMs) * everyMs; slot <= windowEnd; slot += everyMs) {
    const ranOn = bySlot.get(slot) ?? [];
    slots += 1;
    executions += ranOn.length;
    if (ranOn.length > 1) duplicates += ranOn.length - 1;
    if (ranOn.length === 0) missed += 1;
    for (const replica of ranOn) winners.set(replica, (winners.get(replica) ?? 0) + 1);
  }
  const split = [...winners]
    .sort()
    .map(([replica, count]) => `${replica} ${count}`)
    .join(', ');
  console.log(`${job}: ${slots} slots, ${executions} runs (${split}), ${duplicates} duplicates, ${missed} missed`);
  if (duplicates > 0 || missed > 0) failed = true;
}
await guard.close();
process.exitCode = failed ? 1 : 0;
