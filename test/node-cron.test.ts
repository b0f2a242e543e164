// node-cron across replicas, each replica its own OS process, on every dialect.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { explainedByOtherSlots, runsWithoutHold, type ReportedRefusal } from './support/lock-holds.js';
import { eachDialectAtOnce, type DialectCase } from './support/dialects-at-once.js';
import { withGuardOn } from './support/guards.js';
import type { ReplicaMessage } from './support/cron-replica-messages.js';
import { startWorker, type Worker } from './support/processes.js';

type Ran = Extract<ReplicaMessage, { type: 'ran' }>;

interface ReplicaSpec {
  mode: 'schedule' | 'late' | 'coordinator';
  durationMs: number;
  lateMs?: number;
}

/**
 * Fresh tables on the target's database, and replicas running on them: started together once all
 * are ready, and those of the other dialects' cases too (`together`).
 */
async function startReplicas(
  { target, together }: DialectCase,
  specs: ReplicaSpec[],
  runForMs: number,
): Promise<{ url: string; prefix: string; replicas: Worker<ReplicaMessage>[] }> {
  const url = databaseUrl(target);
  const prefix = uniquePrefix();
  await withGuardOn(url, prefix, (guard) => guard.migrate());
  const replicas = specs.map((spec) =>
    startWorker<ReplicaMessage>('cron-replica.ts', [
      url,
      prefix,
      spec.mode,
      String(spec.durationMs),
      String(spec.lateMs ?? 0),
      String(runForMs),
      'await-start',
    ]),
  );
  await Promise.all(replicas.map((replica) => replica.next('ready')));
  await together();
  for (const replica of replicas) replica.send({ type: 'start' });
  return { url, prefix, replicas };
}

function runsOf(replicas: Worker<ReplicaMessage>[]): Ran[] {
  return replicas.flatMap((replica) => replica.received.filter((message): message is Ran => message.type === 'ran'));
}

/** Every whole second strictly inside (first, last): the slots all replicas were up for. */
function innerSlots(runs: Ran[]): string[] {
  const times = runs.map((run) => Date.parse(run.slot)).sort((a, b) => a - b);
  const first = times[0] ?? 0;
  const last = times.at(-1) ?? 0;
  const slots: string[] = [];
  for (let t = first + 1_000; t < last; t += 1_000) slots.push(new Date(t).toISOString());
  return slots;
}

describe('guard.schedule options', () => {
  it('rejects an invalid cron expression or time zone when schedule is called', async () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    try {
      expect(() => guard.schedule('61 * * * *', { name: 'bad', lockAtMostFor: '1m' }, () => 1)).toThrow(
        /^Expected the schedule of job "bad" to be a cron expression like .*, got "61 \* \* \* \*": 61 is outside the minute field.s 0-59$/,
      );
      expect(() => guard.schedule('* * * * *', { name: 'bad', lockAtMostFor: '1m', timezone: 'Mars/Olympus' }, () => 1)).toThrow(
        new TypeError(`Expected \`timezone\` of job "bad" to be an IANA time zone like 'Europe/Paris', got "Mars/Olympus"`),
      );
      expect(() => guard.schedule('* * * * *', { name: 'bad', lockAtMostFor: '5 minutes' }, () => 1)).toThrow(TypeError);
      const task = guard.schedule('0 3 * * *', { name: 'nightly', lockAtMostFor: '1m', timezone: 'Europe/Paris' }, (ctx) => ctx.slot);
      expect(task.getNextRun()).toBeInstanceOf(Date);
      // A run invoked by hand has no slot: it must not mark a slot of the schedule as done.
      await guard.migrate();
      await task.execute();
      const [run] = (await guard.history({ job: 'nightly' })).runs;
      expect(run).toMatchObject({ status: 'succeeded', slot: null });
    } finally {
      await guard.shutdown();
    }
  });

  it('refuses to schedule on a guard that has shut down', async () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    await guard.shutdown();
    expect(() => guard.schedule('* * * * *', { name: 'late', lockAtMostFor: '1m' }, () => 1)).toThrow(
      expect.objectContaining({
        name: 'GuardError',
        code: 'GUARD_CLOSED',
        message: 'The guard is shut down; job "late" was not scheduled',
      }),
    );
  });
});

// Each scenario runs on the three dialects at once (each its own tables and processes): it is
// mostly waiting for the clock.
describe('node-cron replicas', () => {
  eachDialectAtOnce(
    'runs each slot exactly once over 3 replicas, one of them late by more than the job lasts',
    async (dialectCase) => {
      const { url, prefix, replicas } = await startReplicas(
        dialectCase,
        [
          { mode: 'schedule', durationMs: 200 },
          { mode: 'schedule', durationMs: 200 },
          { mode: 'late', durationMs: 200, lateMs: 700 },
        ],
        12_500,
      );
      await Promise.all(replicas.map((replica) => replica.exited));
      const runs = runsOf(replicas);
      const perSlot = new Map<string, number>();
      for (const run of runs) perSlot.set(run.slot, (perSlot.get(run.slot) ?? 0) + 1);
      expect([...perSlot.values()].filter((count) => count > 1)).toEqual([]);
      const inner = innerSlots(runs);
      // Enough seconds to say something (12.5 s of replicas; a busy machine starts them late).
      expect(inner.length).toBeGreaterThanOrEqual(8);
      // A slot no replica ran. When the run of the slot before it was still running at its fire (a
      // stalled machine held up a 200 ms run past the next second), its takers found the lock
      // held, as a tick finding its job running always does: 'locked' skips only. When some replica
      // tried it and was refused otherwise, a bug (its skips say why). When none tried it, every
      // process's timer missed that second (node-cron drops a fire later than its tolerance), at
      // most once.
      const unrun = inner.filter((slot) => !perSlot.has(slot));
      const overranInto = (slot: string): boolean =>
        runs.some((run) => Date.parse(run.slot) === Date.parse(slot) - 1_000 && run.end > Date.parse(slot));
      // A refusal the runs explain: 'locked' while another slot's run held the lock (from its take's
      // send to its release's answer), 'slot-done' once a later slot's run had started.
      const holds = replicas.flatMap((replica) => replica.received.flatMap((message) => (message.type === 'held' ? [message] : [])));
      // Every run's hold was reported (the rule below rests on them).
      expect(runsWithoutHold(runs, holds), JSON.stringify(holds)).toEqual([]);
      const explained = (skip: ReportedRefusal): boolean =>
        (skip.reason === 'locked' && overranInto(skip.slot ?? '')) || explainedByOtherSlots(skip, holds, runs);
      const skipsOf = replicas.flatMap((replica) =>
        replica.received.filter(
          (message) => message.type === 'skipped' && message.slot !== null && unrun.includes(message.slot) && !explained(message),
        ),
      );
      expect(skipsOf, `slots no replica ran: ${unrun.join(', ')}; their refusals: ${JSON.stringify(skipsOf)}`).toEqual([]);
      const unfired = unrun.filter((slot) => !overranInto(slot));
      expect(unfired.length, `slots no replica fired: ${unfired.join(', ')}`).toBeLessThanOrEqual(1);
      // The late replica did try: its fires came after the slot had run, and were skipped.
      const history = (await withGuardOn(url, prefix, (guard) => guard.history({ job: 'tick', limit: 1_000 }))).runs;
      expect(history.length).toBe(runs.length);
      expect(history.every((run) => run.status === 'succeeded')).toBe(true);
    },
    60_000,
  );

  eachDialectAtOnce(
    'never runs a 2.5 s job on a 1 s schedule on two replicas at once, with a coordinator lagging 300 ms',
    async (dialectCase) => {
      const { replicas } = await startReplicas(
        dialectCase,
        [
          { mode: 'coordinator', durationMs: 2_500 },
          { mode: 'coordinator', durationMs: 2_500 },
          { mode: 'coordinator', durationMs: 2_500, lateMs: 300 },
        ],
        10_500,
      );
      await Promise.all(replicas.map((replica) => replica.exited));
      const runs = runsOf(replicas).sort((a, b) => a.start - b.start);
      expect(runs.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < runs.length; i += 1) {
        expect(runs[i]?.start ?? 0, `run ${i} started before run ${i - 1} ended`).toBeGreaterThanOrEqual(runs[i - 1]?.end ?? Infinity);
      }
      expect(new Set(runs.map((run) => run.slot)).size).toBe(runs.length);
    },
    60_000,
  );

  eachDialectAtOnce(
    'on SIGTERM finishes the run, releases, exits 0, and another replica runs the next slot, not held back by its lock',
    async (dialectCase) => {
      const { url, prefix, replicas } = await startReplicas(
        dialectCase,
        [
          { mode: 'schedule', durationMs: 1_500 },
          { mode: 'schedule', durationMs: 1_500 },
        ],
        15_000,
      );
      // Wait for a run to start, then stop its replica in the middle of it.
      let started: Extract<ReplicaMessage, { type: 'started' }> | undefined;
      await dialectCase.expect
        .poll(
          () =>
            (started = replicas
              .flatMap((r) => r.received)
              .find((m): m is Extract<ReplicaMessage, { type: 'started' }> => m.type === 'started')),
          {
            timeout: 10_000,
          },
        )
        .toBeDefined();
      const victim = replicas.find((replica) => replica.child.pid === started?.pid);
      const survivor = replicas.find((replica) => replica !== victim);
      if (victim === undefined || survivor === undefined || started === undefined) throw new Error('no running replica');
      await sleep(300);
      victim.child.kill('SIGTERM');
      expect(await victim.exited).toBe(0);
      const finished = victim.received.find((m): m is Ran => m.type === 'ran' && m.slot === started?.slot);
      expect(finished, 'the run in flight finished').toBeDefined();
      // The next slot after the victim released: run by the survivor, long before the victim's lock
      // (lockAtMostFor 10 s from its slot) would have expired had the release not freed it.
      await dialectCase.expect
        .poll(() => survivor.received.find((m): m is Ran => m.type === 'ran' && Date.parse(m.slot) >= (finished?.end ?? Infinity)), {
          // Up to the victim's lock's expiry and past: the check below says whether the lock held it back.
          timeout: 12_000,
        })
        .toBeDefined();
      const next = survivor.received.find((m): m is Ran => m.type === 'ran' && Date.parse(m.slot) >= (finished?.end ?? Infinity));
      expect(Date.parse(next?.slot ?? '')).toBeLessThan(Date.parse(started.slot) + 10_000);
      survivor.child.kill('SIGTERM');
      expect(await survivor.exited).toBe(0);
      const [{ runs: history }, locks] = await withGuardOn(
        url,
        prefix,
        async (guard) => [await guard.history({ job: 'tick' }), await guard.locks()] as const,
      );
      expect(history.find((run) => run.slot?.toISOString() === started?.slot)?.status).toBe('succeeded');
      expect(history.filter((run) => run.status === 'running')).toEqual([]);
      expect(locks.map((lock) => lock.running)).toEqual([false]);
    },
    60_000,
  );
});
