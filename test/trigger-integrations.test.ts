// "Run now" (guard.trigger) for the jobs that guard.schedule does not run, across OS processes on
// every dialect: tasks of a node-cron coordinator and @GuardedCron methods of a Nest app, on a
// yearly schedule (no fire during the test), triggered by the `cronguard` command from another process.
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, type ExpectStatic } from 'vitest';
import type { DialectTarget } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn } from './support/guards.js';
import type { Worker } from './support/processes.js';
import { startReplicaGroup } from './support/replica-group.js';
import { assertBuilt } from './support/run-process.js';

type Message =
  | { type: 'ready' | 'exiting' | 'task-stopped'; pid: number }
  | { type: 'ran'; pid: number; runId: string | null; slot: string | null; reason?: string | null };
type Ran = Extract<Message, { type: 'ran' }>;

/** Every replica looks for requests this often (PostgreSQL hears of them at once too). */
const POLL = '1s';
/** How soon a triggered run starts: the poll, plus a busy machine's delays. */
const BOUND_MS = 4_000;

beforeAll(() => assertBuilt());

function startReplicas(target: DialectTarget, fixture: string, count: number) {
  return startReplicaGroup<Message>(target, fixture, count, [POLL]);
}

function runsOf(replicas: Worker<Message>[]): Ran[] {
  return replicas.flatMap((replica) => replica.received.filter((message): message is Ran => message.type === 'ran'));
}

async function stopAll(replicas: Worker<Message>[]): Promise<void> {
  for (const replica of replicas) replica.child.kill('SIGTERM');
  await Promise.all(replicas.map((replica) => replica.exited));
}

/**
 * Triggers 'yearly' and expects exactly one manual run, on one replica, within the bound, recorded with who asked.
 * `poll`: the case's own expect (`expect.poll` refuses the global one in a concurrent test).
 */
async function expectOneManualRun(started: Awaited<ReturnType<typeof startReplicas>>, poll: ExpectStatic): Promise<Ran> {
  const { url, prefix, replicas, cronguard } = started;
  await cronguard('trigger', 'yearly', '--by', 'tester');
  // Within the bound from the moment the command returned.
  await poll.poll(() => runsOf(replicas).length, { timeout: BOUND_MS, interval: 50 }).toBe(1);
  // Exactly one: no other replica runs it after the first.
  await sleep(2_000);
  const runs = runsOf(replicas);
  expect(runs).toHaveLength(1);
  const [run] = runs as [Ran];
  expect(run).toMatchObject({ slot: null, runId: expect.any(String) });
  const { guard } = guardOn(url, prefix);
  const { runs: history } = await guard.history({ job: 'yearly' });
  expect(history.map((row) => [row.id, row.slot, row.triggeredBy, row.status])).toEqual([[run.runId, null, 'tester', 'succeeded']]);
  const [lock] = await guard.locks();
  expect(lock).toMatchObject({ name: 'yearly', pendingTrigger: null });
  return run;
}

/** A node-cron coordinator's task: one manual run, the task's function invoked by node-cron; stopped tasks stop answering. */
async function checkCoordinator(started: Awaited<ReturnType<typeof startReplicas>>, poll: ExpectStatic): Promise<void> {
  const { url, prefix, replicas, cronguard } = started;
  const run = await expectOneManualRun(started, poll);
  // The task's own function, invoked by node-cron (no coordinator fire), inside the guard's run.
  expect(run.reason).toBe('invoked');
  // Stopped tasks do not answer: the request stays pending.
  for (const replica of replicas) replica.send({ type: 'stop-task' });
  await Promise.all(replicas.map((replica) => replica.next('task-stopped')));
  await cronguard('trigger', 'yearly', '--by', 'tester');
  await sleep(2_500);
  expect(runsOf(replicas)).toHaveLength(1);
  const [lock] = await guardOn(url, prefix).guard.locks();
  expect(lock?.pendingTrigger).toMatchObject({ by: 'tester' });
}

// The three dialects at once (each its own tables and processes): the scenario waits on polls and the clock.
describe('"run now" for coordinator and @GuardedCron jobs', () => {
  // Both at once (their own tables), to keep the run short: 2 replicas with a coordinator task, 2 Nest apps.
  eachDialectAtOnce(
    'a node-cron coordinator task and a @GuardedCron method each run once, on one replica; a stopped task stops answering',
    async ({ target, expect: caseExpect, together }) => {
      const [coordinated, nest] = await Promise.all([
        startReplicas(target, 'trigger-replica.ts', 2),
        startReplicas(target, 'nest-trigger-replica.ts', 2),
      ]);
      try {
        // Every case's replicas are up before any case triggers and counts the bound.
        await together();
        await Promise.all([checkCoordinator(coordinated, caseExpect), expectOneManualRun(nest, caseExpect)]);
      } finally {
        await Promise.all([stopAll(coordinated.replicas), stopAll(nest.replicas)]);
      }
    },
    60_000,
  );
});
