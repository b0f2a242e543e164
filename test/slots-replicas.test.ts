// The slot ledger's "done when", with replicas in their own OS processes, on every dialect: three
// replicas all stopped across three slots of an every-second job and started again.
import { describe, expect } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce, type DialectCase } from './support/dialects-at-once.js';
import { withGuardOn } from './support/guards.js';
import { droppedByAll, startWorker, type Worker } from './support/processes.js';

type Message =
  | { type: 'ready'; pid: number }
  | { type: 'ran'; pid: number; slot: string; catchUp: boolean }
  | { type: 'missed'; pid: number; slots: string[]; count: number }
  | { type: 'paused'; pid: number; at: number }
  | { type: 'resumed'; pid: number; at: number }
  | { type: 'exiting'; pid: number };

function replicas(url: string, prefix: string, count: number, lockAtLeastFor: string, catchUp: string): Worker<Message>[] {
  return Array.from({ length: count }, () => startWorker<Message>('ledger-replica.ts', [url, prefix, lockAtLeastFor, catchUp]));
}

function messages<T extends Message['type']>(workers: Worker<Message>[], type: T): Extract<Message, { type: T }>[] {
  return workers.flatMap((worker) => worker.received.filter((message): message is Extract<Message, { type: T }> => message.type === type));
}

/**
 * Three replicas run the job until slot T0, then all stop scheduling it (at T0 + 0.2 s) and start
 * again at T0 + 3.15 s (after slot T0 + 3; the most time before T0 + 4 for the catch-up's read on a
 * busy machine), as restarted replicas would, until T0 + 6.5 s. The
 * gap is what the replicas really ran: the slots strictly between the newest slot run before the
 * stop and the oldest slot fired after the restart (T0+1 to T0+3 unless a timer was very late).
 */
async function stopAcrossThreeSlots({ target, together }: DialectCase, catchUp: string, keepTask = false) {
  const url = databaseUrl(target);
  const prefix = uniquePrefix();
  await withGuardOn(url, prefix, (guard) => guard.migrate());
  const all = replicas(url, prefix, 3, '0ms', catchUp);
  await Promise.all(all.map((worker) => worker.next('ready')));
  await together();
  const t0 = Math.ceil((Date.now() + 2_500) / 1_000) * 1_000;
  for (const worker of all) worker.send({ startAt: 0, pauseAt: t0 + 600, resumeAt: t0 + 3_150, stopAt: t0 + 6_500, keepTask });
  await Promise.all(all.map((worker) => worker.exited));
  const ran = messages(all, 'ran');
  const times = (list: typeof ran): number[] => list.map((message) => Date.parse(message.slot));
  const before = Math.max(...times(ran.filter((message) => Date.parse(message.slot) <= t0 + 600)));
  const after = Math.min(...times(ran.filter((message) => Date.parse(message.slot) > t0 + 600 && !message.catchUp)));
  // No run before the pause (or after the resume): a machine stalled past the scenario's slots,
  // which then has no gap to speak of (and a loop from -Infinity would never end).
  const stalled = !Number.isFinite(before) || !Number.isFinite(after);
  const gap: number[] = [];
  if (!stalled) for (let slot = before + 1_000; slot < after; slot += 1_000) gap.push(slot);
  // A replica whose resume a busy machine delayed past slot T0 + 4 starts with T0 + 4 as its newest
  // slot, and one whose pause it delayed past T0 + 1 runs T0 + 1: what the catch-up then runs is
  // right, but not the case the scenario is about.
  const resumedLate = messages(all, 'resumed').some((message) => message.at >= t0 + 3_900);
  const pausedLate = messages(all, 'paused').some((message) => message.at >= t0 + 950);
  const timeline = [...messages(all, 'paused'), ...messages(all, 'resumed'), ...ran]
    .map((message) => `${message.pid} ${JSON.stringify({ ...message, pid: undefined })}`)
    .join('\n');
  return { t0, prefix, url, all, ran, gap, late: resumedLate || pausedLate || stalled, timeline };
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The 'missed' reports of a scenario: the one of its gap (the report that names `firstOfGap`), and
 * the slots of any other report that node-cron did not drop in every replica. A stalled machine can
 * make every replica's timer drop a later fire too: that slot is missed, and reported as such, as it
 * should be; any other extra report is a fault.
 */
function missedReports(all: Worker<Message>[], firstOfGap: string) {
  const missed = messages(all, 'missed');
  const ofGap = missed.filter((message) => message.slots.includes(firstOfGap));
  const others = [...new Set(missed.filter((message) => !ofGap.includes(message)).flatMap((message) => message.slots))];
  return {
    ofGap,
    droppedEverywhere: others.filter((slot) => droppedByAll(all, Date.parse(slot))),
    unexplained: others.filter((slot) => !droppedByAll(all, Date.parse(slot))),
    described: `missed reports: ${JSON.stringify(missed)}; fires node-cron dropped per replica: ${JSON.stringify(all.map((worker) => worker.droppedFires.map(iso)))}`,
  };
}

// Each scenario runs on the three dialects at once (each its own tables and processes): it is
// mostly waiting for the clock.
describe('the slot ledger across replicas', () => {
  eachDialectAtOnce('shows the three slots no replica ran as missed, and fires missed once with the three', async (dialectCase) => {
    let scenario = await stopAcrossThreeSlots(dialectCase, '-');
    // Once more, on tables of its own, when a replica paused or resumed too late (a full run on 2 cores).
    if (scenario.late) scenario = await stopAcrossThreeSlots(dialectCase, '-');
    const { t0, url, prefix, all, ran, gap, timeline } = scenario;
    expect(gap.map(iso), `T0 ${iso(t0)}; pauses, resumes and runs:\n${timeline}`).toEqual([
      iso(t0 + 1_000),
      iso(t0 + 2_000),
      iso(t0 + 3_000),
    ]);
    const slots = ran.map((message) => message.slot);
    expect(new Set(slots).size).toBe(slots.length);
    const { ofGap, droppedEverywhere, unexplained, described } = missedReports(all, iso(t0 + 1_000));
    expect(unexplained, described).toEqual([]);
    expect(ofGap, described).toHaveLength(1);
    expect(ofGap[0]).toMatchObject({ count: gap.length, slots: gap.map(iso) });
    const [ledger] = await withGuardOn(url, prefix, (guard) =>
      guard.slots({ job: 'tick', since: new Date(t0 - 1_000), until: new Date(t0 + 6_000) }),
    );
    const missedInLedger = ledger?.slots.filter((entry) => entry.outcome === 'missed').map((entry) => entry.slot.toISOString());
    // A fire dropped everywhere is missed in the ledger too, where the ledger's range lists its slot.
    const listed = new Set(ledger?.slots.map((entry) => entry.slot.toISOString()));
    expect(missedInLedger, described).toEqual([...gap.map(iso), ...droppedEverywhere.filter((slot) => listed.has(slot))].sort());
    // A run a busy machine started past lateAfter is `late`: still run, which is all this scenario
    // asks of it. A slot whose fire found the previous slot's run still holding the lock (a run a
    // stalled machine kept past the next second) is `overlapped`: right, but outside the gap only.
    const outcomes = ledger?.slots.map((entry) => ({ slot: entry.slot.toISOString(), outcome: entry.outcome })) ?? [];
    const allowed = (entry: { slot: string; outcome: string }): boolean =>
      ['missed', 'succeeded', 'late'].includes(entry.outcome) || (entry.outcome === 'overlapped' && !gap.map(iso).includes(entry.slot));
    expect(
      outcomes.filter((entry) => !allowed(entry)),
      `${described}\n${timeline}`,
    ).toEqual([]);
  });

  for (const [replicasWere, keepTask] of [
    ['restarted', false],
    ['kept running, their schedules stopped and started again', true],
  ] as const) {
    eachDialectAtOnce(
      `with catchUp: '10s', runs the newest missed slot once, on one replica (replicas ${replicasWere})`,
      async (dialectCase) => {
        let scenario = await stopAcrossThreeSlots(dialectCase, '10s', keepTask);
        // Once more, on tables of its own, when a replica paused or resumed too late (a full run on 2 cores).
        if (scenario.late) scenario = await stopAcrossThreeSlots(dialectCase, '10s', keepTask);
        const { t0, url, prefix, all, ran, timeline } = scenario;
        const catchUps = ran.filter((message) => message.catchUp);
        expect(catchUps, `T0 ${iso(t0)}; pauses, resumes and runs:\n${timeline}`).toHaveLength(1);
        expect(catchUps[0]?.slot).toBe(iso(t0 + 3_000));
        const slots = ran.map((message) => message.slot);
        expect(new Set(slots).size).toBe(slots.length);
        const { ofGap, droppedEverywhere, unexplained, described } = missedReports(all, iso(t0 + 1_000));
        expect(unexplained, described).toEqual([]);
        expect(ofGap, described).toHaveLength(1);
        expect(ofGap[0]).toMatchObject({ count: 2, slots: [iso(t0 + 1_000), iso(t0 + 2_000)] });
        const [ledger] = await withGuardOn(url, prefix, (guard) =>
          guard.slots({ job: 'tick', since: new Date(t0), until: new Date(t0 + 6_000) }),
        );
        const caughtUp = ledger?.slots[3];
        expect(caughtUp).toMatchObject({ slot: new Date(t0 + 3_000), catchUp: true });
        expect(['succeeded', 'late']).toContain(caughtUp?.outcome);
        const listed = new Set(ledger?.slots.map((entry) => entry.slot.toISOString()));
        expect(ledger?.counts.missed, described).toBe(2 + droppedEverywhere.filter((slot) => listed.has(slot)).length);
      },
    );
  }

  eachDialectAtOnce(
    'shows slots eaten by a lockAtLeastFor longer than the interval as overlapped, and doctor flags it',
    async (dialectCase) => {
      const url = databaseUrl(dialectCase.target);
      const prefix = uniquePrefix();
      await withGuardOn(url, prefix, (guard) => guard.migrate());
      const workers = replicas(url, prefix, 3, '2500ms', '-');
      await Promise.all(workers.map((worker) => worker.next('ready')));
      await dialectCase.together();
      // The replicas schedule (and declare) the job when the message comes: T0 well after that, as
      // the ledger expects no slot before the job was declared (with T0 1.5 s ahead, a loaded machine
      // once listed 6 slots of 7).
      const t0 = Math.ceil((Date.now() + 3_000) / 1_000) * 1_000;
      for (const worker of workers) worker.send({ startAt: 0, stopAt: t0 + 7_500 });
      await Promise.all(workers.map((worker) => worker.exited));
      expect(messages(workers, 'missed')).toEqual([]);
      // The newest slot, overlapped, is listed once lateAfter (1 s) has passed after it: a ledger
      // read as soon as the replicas have exited may come a little before that.
      const [[ledger], diagnoses] = await withGuardOn(url, prefix, async (guard) => {
        const read = () => guard.slots({ job: 'tick', since: new Date(t0), until: new Date(t0 + 7_000) });
        await dialectCase.expect.poll(async () => (await read())[0]?.slots.length, { timeout: 10_000 }).toBe(7);
        return [await read(), await guard.doctor()] as const;
      });
      const outcomes = ledger?.slots.map((entry) => entry.outcome) ?? [];
      expect(outcomes).toHaveLength(7);
      expect(outcomes.filter((outcome) => outcome === 'overlapped').length).toBeGreaterThanOrEqual(4);
      expect(outcomes.every((outcome) => outcome === 'overlapped' || outcome === 'succeeded')).toBe(true);
      const diagnosis = diagnoses.find((job) => job.job === 'tick');
      expect(diagnosis?.problems.join('\n')).toMatch(/lockAtLeastFor \(2500 ms\) is at or above the schedule's interval \(1000 ms\)/);
    },
  );
});
