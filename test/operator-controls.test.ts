// Operator controls across OS processes, on every dialect (issue 17's "done when"): 3 replicas
// of an every-second guard.schedule job, steered by the `cronguard` command from another process.
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect } from 'vitest';
import { eachDialectAtOnce, type DialectCase } from './support/dialects-at-once.js';
import { withGuardOn } from './support/guards.js';
import { droppedByAll, type Worker } from './support/processes.js';
import { startReplicaGroup } from './support/replica-group.js';
import { everyRefusalExplained, runsWithoutHold, type LockHold, type ReportedRefusal } from './support/lock-holds.js';
import { assertBuilt } from './support/run-process.js';

type Message =
  | { type: 'ready' | 'exiting'; pid: number }
  | { type: 'ran'; pid: number; slot: string | null; start: number; end: number }
  | { type: 'paused'; pid: number; job: string; by: string; reason: string | null; auto: boolean }
  | ({ type: 'held'; pid: number } & LockHold)
  | ({ type: 'skipped'; pid: number } & ReportedRefusal);
type Ran = Extract<Message, { type: 'ran' }>;

beforeAll(() => assertBuilt());

/** Three replicas on fresh tables; resolves once those of the other dialects' cases are up too. */
async function startReplicas({ target, together }: DialectCase, mode: 'ok' | 'fail', pollInterval: string, runForMs: number) {
  const group = await startReplicaGroup<Message>(target, 'controlled-replica.ts', 3, [mode, pollInterval, String(runForMs)]);
  await together();
  return group;
}

function runsOf(replicas: Worker<Message>[]): Ran[] {
  return replicas
    .flatMap((replica) => replica.received.filter((message): message is Ran => message.type === 'ran'))
    .sort((a, b) => a.start - b.start);
}

async function stopAll(replicas: Worker<Message>[]): Promise<void> {
  for (const replica of replicas) replica.child.kill('SIGTERM');
  await Promise.all(replicas.map((replica) => replica.exited));
}

// Each scenario runs on the three dialects at once (each its own tables and processes): it is
// mostly waiting for the clock.
describe('operator controls across processes', () => {
  eachDialectAtOnce(
    'pause stops every replica from the next slot on, resume restarts them, pause --until lifts itself, trigger runs once',
    async (dialectCase) => {
      // PostgreSQL hears of a trigger through LISTEN/NOTIFY: its replicas poll at the default 5 s,
      // and the run must still start within a second. The others poll every second.
      const pollMs = dialectCase.target.name === 'postgres' ? 5_000 : 1_000;
      const { url, prefix, replicas, cronguard } = await startReplicas(dialectCase, 'ok', `${pollMs}ms`, 60_000);
      try {
        const startedAfter = (at: number): Ran[] => runsOf(replicas).filter((run) => run.start > at);
        await dialectCase.expect.poll(() => startedAfter(0).length, { timeout: 15_000 }).toBeGreaterThanOrEqual(2);

        // Pause: from the next slot on, no replica starts it (a run whose take committed before
        // the pause may start a few ms after the command returned).
        const paused = await cronguard('pause', 'tick', '--reason', 'test', '--by', 'tester');
        await sleep(3_500);
        expect(startedAfter(paused + 500)).toEqual([]);

        const resumed = await cronguard('resume', 'tick', '--by', 'tester');
        await dialectCase.expect.poll(() => startedAfter(resumed).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);

        // pause --until 3s: nothing for about 3 s, then it runs again by itself.
        // The pause lifts 3 s after the database wrote it, which is before the command returned (a
        // loaded machine took over half a second to end the CLI's process): the window is the lock row's.
        await cronguard('pause', 'tick', '--until', '3s');
        const until = await withGuardOn(url, prefix, async (guard) => (await guard.controls('tick'))[0]?.until);
        expect(until).toBeInstanceOf(Date);
        const liftsAt = (until as Date).getTime();
        await dialectCase.expect.poll(() => startedAfter(liftsAt).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
        expect(startedAfter(liftsAt - 2_500).filter((run) => run.start < liftsAt - 500)).toEqual([]);
        // Slots run again, so that the ones before the trigger are not paused ones.
        await sleep(3_000);

        // Trigger: one manual run (no slot), within the poll bound; the slots around it run once each.
        const triggered = await cronguard('trigger', 'tick', '--by', 'tester');
        const boundMs = dialectCase.target.name === 'postgres' ? 1_000 : pollMs + 1_000;
        await dialectCase.expect
          .poll(() => startedAfter(triggered - 1_000).filter((run) => run.slot === null).length, { timeout: 10_000 })
          .toBe(1);
        await sleep(3_000);
        const manual = runsOf(replicas).filter((run) => run.slot === null);
        expect(manual).toHaveLength(1);
        expect(manual[0]?.start).toBeLessThan(triggered + boundMs);

        const scheduled = runsOf(replicas).filter((run) => run.slot !== null);
        const perSlot = new Map<string, number>();
        for (const run of scheduled) perSlot.set(run.slot as string, (perSlot.get(run.slot as string) ?? 0) + 1);
        expect([...perSlot.entries()].filter(([, count]) => count > 1)).toEqual([]);
        // Every whole second from 2.5 s before the trigger to 2 s after ran, except a slot that fired
        // while the manual run held the lock (a slot's tick finding its job running is skipped, as always).
        const around: string[] = [];
        for (let t = Math.ceil((triggered - 2_500) / 1_000) * 1_000; t <= triggered + 2_000; t += 1_000)
          around.push(new Date(t).toISOString());
        const held = manual[0] as Ran;
        // A second whose fire node-cron dropped in every replica (a stalled machine) was fired by
        // nobody. One whose every refusal another run's hold explains (the manual run's lock, held from
        // its take's send to its release's answer, which a loaded machine can stretch past the body) was
        // refused as it should be (test/support/lock-holds.ts). A replica reports a hold once its
        // release is answered, after the run, and a refusal once its skip is decided: on a loaded
        // machine the last of them arrive a moment after the runs, so the check is polled until they
        // are in (a run with no hold, or a slot missed without a reason, never gets one).
        const reported = <T extends Message['type']>(type: T): Extract<Message, { type: T }>[] =>
          replicas.flatMap((replica) =>
            replica.received.filter((message): message is Extract<Message, { type: T }> => message.type === type),
          );
        const unexplained = (): { runsWithoutHold: unknown[]; missed: unknown[] } => {
          const holds = reported('held');
          const refusals = reported('skipped');
          const ranAt = runsOf(replicas).map((run) => ({ slot: run.slot, start: run.start, end: run.end }));
          const ranSlots = new Set(ranAt.map((run) => run.slot));
          const missed = around.filter(
            (slot) =>
              !ranSlots.has(slot) &&
              (Date.parse(slot) < held.start - 100 || Date.parse(slot) > held.end + 100) &&
              !droppedByAll(replicas, Date.parse(slot)) &&
              !everyRefusalExplained(slot, refusals, holds, ranAt),
          );
          return {
            runsWithoutHold: runsWithoutHold(ranAt, holds),
            missed: missed.map((slot) => ({ slot, refusals: refusals.filter((refusal) => refusal.slot === slot), holds })),
          };
        };
        await dialectCase.expect.poll(unexplained, { timeout: 10_000 }).toEqual({ runsWithoutHold: [], missed: [] });

        const [{ runs }, controls] = await withGuardOn(
          url,
          prefix,
          async (guard) => [await guard.history({ job: 'tick', limit: 1_000 }), await guard.controls('tick')] as const,
        );
        expect(runs.filter((run) => run.triggeredBy !== null).map((run) => [run.slot, run.triggeredBy])).toEqual([[null, 'tester']]);
        expect(controls.map((entry) => entry.action)).toEqual(['trigger', 'pause', 'resume', 'pause']);
      } finally {
        await stopAll(replicas);
      }
    },
    90_000,
  );

  eachDialectAtOnce(
    'auto-pauses a job after 3 failed runs in a row, once, whichever replicas ran them',
    async (dialectCase) => {
      const { url, prefix, replicas } = await startReplicas(dialectCase, 'fail', '1s', 60_000);
      try {
        const pausedEvents = (): Message[] =>
          replicas.flatMap((replica) => replica.received.filter((message) => message.type === 'paused'));
        await dialectCase.expect.poll(() => pausedEvents().length, { timeout: 20_000 }).toBe(1);
        await sleep(2_500);
        expect(pausedEvents()).toHaveLength(1);
        expect(pausedEvents()[0]).toMatchObject({
          job: 'tick',
          auto: true,
          reason: expect.stringContaining('upstream down'),
        });
        // The first runs may have started before every replica was up; none after the third failure.
        expect(runsOf(replicas)).toHaveLength(3);
        const [{ runs }, [lock], controls] = await withGuardOn(
          url,
          prefix,
          async (guard) => [await guard.history({ job: 'tick' }), await guard.locks(), await guard.controls('tick')] as const,
        );
        expect(runs.map((run) => run.status)).toEqual(['failed', 'failed', 'failed']);
        expect(lock?.paused).toMatchObject({
          until: null,
          reason: expect.stringContaining('auto-paused after 3 failed runs in a row'),
        });
        expect(controls.map((entry) => entry.action)).toEqual(['auto-pause']);
      } finally {
        await stopAll(replicas);
      }
    },
    90_000,
  );
});
