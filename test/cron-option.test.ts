// The `cron` job option: a call made by someone else's scheduler claims the slot that expression
// last fired at, so that decorated calls, guard.run calls and guard.schedule fires of one job share
// the slot watermark.
import cron from 'node-cron';
import { explainedByOtherSlots, runsWithoutHold, type LockHold, type ReportedRefusal } from './support/lock-holds.js';
import { describe, expect, it } from 'vitest';
import { createGuard, guarded, type RunOptions } from '../src/index.js';
import { EARLY_CALL_TOLERANCE_MS } from '../src/core/cron-slots.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { startWorker } from './support/processes.js';

/** Fires once a year (1 January, 00:00:00 UTC): two calls of one test never straddle a fire. */
const YEARLY = { cron: '0 0 0 1 1 *', timezone: 'UTC' };

function slotsOf(cron: string, timezone?: string) {
  const guard = createGuard({ database: 'sqlite::memory:' });
  const slots = guard.resolveJob({
    name: 'slots',
    lockAtMostFor: '1m',
    cron,
    ...(timezone === undefined ? {} : { timezone }),
  }).cron;
  void guard.close();
  if (slots === undefined) throw new Error('no cron');
  return (at: string): string => slots.slotAt(new Date(at)).toISOString();
}

describe('the slot a call claims', () => {
  it('is the last fire at or before the call, on the replica clock; a call up to 100 ms early claims the coming fire', () => {
    expect(EARLY_CALL_TOLERANCE_MS).toBe(100);
    const everySecond = slotsOf('* * * * * *');
    expect(everySecond('2026-12-01T10:00:05.000Z')).toBe('2026-12-01T10:00:05.000Z');
    expect(everySecond('2026-12-01T10:00:05.899Z')).toBe('2026-12-01T10:00:05.000Z');
    expect(everySecond('2026-12-01T10:00:05.900Z')).toBe('2026-12-01T10:00:06.000Z');
    expect(everySecond('2026-12-01T10:00:05.997Z')).toBe('2026-12-01T10:00:06.000Z');
    const everyFiveMinutes = slotsOf('*/5 * * * *');
    // Late by up to the gap less 100 ms: still that fire.
    expect(everyFiveMinutes('2026-12-01T10:04:59.899Z')).toBe('2026-12-01T10:00:00.000Z');
    expect(everyFiveMinutes('2026-12-01T10:04:59.950Z')).toBe('2026-12-01T10:05:00.000Z');
    expect(everyFiveMinutes('2026-12-01T10:05:00.400Z')).toBe('2026-12-01T10:05:00.000Z');
  });

  it("leaves nothing in node-cron's task registry, and shares one matcher between calls of one expression", () => {
    const before = cron.getTasks().size;
    const guard = createGuard({ database: 'sqlite::memory:' });
    const first = guard.resolveJob({ name: 'a', lockAtMostFor: '1m', cron: '13 * * * * *' }).cron;
    const second = guard.resolveJob({ name: 'b', lockAtMostFor: '1m', cron: '13 * * * * *' }).cron;
    const otherZone = guard.resolveJob({
      name: 'c',
      lockAtMostFor: '1m',
      cron: '13 * * * * *',
      timezone: 'Asia/Tokyo',
    }).cron;
    void guard.close();
    expect(cron.getTasks().size).toBe(before);
    expect(second).toBe(first);
    expect(otherZone).not.toBe(first);
  });

  it('reads the expression in its time zone, going back as far as the last fire', () => {
    const parisMidnight = slotsOf('0 0 * * *', 'Europe/Paris');
    expect(parisMidnight('2026-12-01T22:59:00.000Z')).toBe('2026-11-30T23:00:00.000Z');
    expect(parisMidnight('2026-12-01T23:00:00.000Z')).toBe('2026-12-01T23:00:00.000Z');
    // Summer time: Paris midnight is 22:00 UTC.
    expect(parisMidnight('2026-07-01T12:00:00.000Z')).toBe('2026-06-30T22:00:00.000Z');
    const leapDay = slotsOf('0 0 29 2 *', 'UTC');
    expect(leapDay('2026-12-01T10:00:00.000Z')).toBe('2024-02-29T00:00:00.000Z');
    // Calls out of order are answered right too (the last answer is cached).
    const everySecond = slotsOf('*/7 * * * * *');
    expect(everySecond('2026-12-01T10:00:20.000Z')).toBe('2026-12-01T10:00:14.000Z');
    expect(everySecond('2026-12-01T10:00:02.000Z')).toBe('2026-12-01T10:00:00.000Z');
    expect(everySecond('2026-12-01T10:00:21.500Z')).toBe('2026-12-01T10:00:21.000Z');
  });
});

describe('the slots of one expression asked by many jobs at once', () => {
  it('answers slotAt and fireAfter as node-cron does, whatever the order of the questions', () => {
    // Every job of one expression shares its answers (kept in windows): at each fire, each job asks
    // the slot it claims, the slot before it and the fire after it, and other callers ask about any
    // time at all. Checked against node-cron's matcher walked one second at a time.
    const everyMs = { '*/7 * * * * *': 7_000, '* * * * *': 60_000, '*/5 * * * *': 300_000, '0 */2 * * *': 7_200_000 };
    for (const [expression, periodMs] of Object.entries(everyMs)) {
      const task = cron.createTask(expression, () => undefined, { timezone: 'UTC' });
      const matcher = (task as unknown as { timeMatcher: { getNextMatch(date: Date): Date } }).timeMatcher;
      void task.destroy();
      const nextAfter = (ms: number): number => matcher.getNextMatch(new Date(ms)).getTime();
      // Walked forward from two periods before: the fire at or before `ms`.
      const lastAtOrBefore = (ms: number): number => {
        let fire = nextAfter(ms - 2 * periodMs);
        for (let after = nextAfter(fire); after <= ms; after = nextAfter(fire)) fire = after;
        return fire;
      };
      const guard = createGuard({ database: 'sqlite::memory:' });
      const slots = guard.resolveJob({ name: 'shared', lockAtMostFor: '1m', cron: expression, timezone: 'UTC' }).cron;
      void guard.close();
      if (slots === undefined) throw new Error('no cron');
      const start = Date.UTC(2026, 11, 1, 10, 0, 0);
      let seed = 7;
      const random = (): number => ((seed = (seed * 16_807) % 2_147_483_647) - 1) / 2_147_483_646;
      const wrong: string[] = [];
      let cursor = start;
      for (let question = 0; question < 150; question += 1) {
        // Mostly in order, as fires come (one fire on, two fires on, a little late); a third
        // anywhere within four hours, back or forth.
        const kind = question % 3;
        if (kind < 2) cursor = nextAfter(kind === 0 ? cursor : nextAfter(cursor));
        const at = kind === 2 ? start + Math.floor(random() * 4 * 3_600_000) : cursor + Math.floor(random() * 90);
        const slot = slots.slotAt(new Date(at)).getTime();
        const expected = lastAtOrBefore(at + EARLY_CALL_TOLERANCE_MS);
        if (slot !== expected) wrong.push(`${expression} slotAt ${new Date(at).toISOString()}: ${new Date(slot).toISOString()}`);
        const before = slots.slotAt(new Date(slot - 1_000)).getTime();
        if (before !== lastAtOrBefore(slot - 1_000)) wrong.push(`${expression} slot before ${new Date(slot).toISOString()}`);
        for (const from of [slot, at, before]) {
          if (slots.fireAfter(new Date(from)).getTime() !== nextAfter(from))
            wrong.push(`${expression} fireAfter ${new Date(from).toISOString()}`);
        }
      }
      expect(wrong).toEqual([]);
    }
  });
});

describe('`cron` and `timezone` validation', () => {
  const cases: [string, Partial<RunOptions>, string][] = [
    ['a bad expression', { cron: '61 * * * *' }, 'Expected `cron` of job "nightly" to be a cron expression like'],
    [
      'a non-string',
      { cron: 5 as unknown as string },
      "Expected `cron` of job \"nightly\" to be a cron expression like '0 * * * *' or '*/10 * * * * *', got 5",
    ],
    [
      'an unknown time zone',
      { cron: '* * * * *', timezone: 'Mars/Olympus' },
      'Expected `timezone` of job "nightly" to be an IANA time zone like \'Europe/Paris\', got "Mars/Olympus"',
    ],
  ];
  it.each(cases)('rejects %s in guard.run, resolveJob, guard.guarded and guarded()', async (_label, options, message) => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    try {
      const job = { name: 'nightly', lockAtMostFor: '1m', ...options };
      await expect(guard.run(job, () => 1)).rejects.toThrow(TypeError);
      await expect(guard.run(job, () => 1)).rejects.toThrow(message);
      expect(() => guard.resolveJob(job)).toThrow(message);
      expect(() => guard.guarded(job)).toThrow(message);
      expect(() => guarded(job)).toThrow(message);
    } finally {
      await guard.close();
    }
  });

  it('lets guard.schedule take `cron` only when it is the expression it fires on', async () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    try {
      expect(() => guard.schedule('0 * * * *', { name: 'hourly', lockAtMostFor: '1m', cron: '*/5 * * * *' }, () => 1)).toThrow(
        new TypeError(
          'Expected `cron` of job "hourly" to be left out of guard.schedule, which fires on its own expression "0 * * * *", got "*/5 * * * *"',
        ),
      );
      const task = guard.schedule('0 * * * *', { name: 'hourly', lockAtMostFor: '1m', cron: '0 * * * *' }, () => 1);
      await task.destroy();
    } finally {
      await guard.close();
    }
  });
});

describe.each(dialectTargets())('`cron` on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('gives one run per slot across replicas: a second call of the same slot is skipped as slot-done, even with lockAtLeastFor 0', async () => {
      const first = await migratedGuard(target);
      const second = guardOn(first.url, first.prefix);
      const job = { name: 'yearly', lockAtMostFor: '1m', lockAtLeastFor: 0, ...YEARLY };
      expect(await first.guard.run(job, (ctx) => ctx.slot?.toISOString())).toEqual({
        executed: true,
        value: `${new Date().getUTCFullYear()}-01-01T00:00:00.000Z`,
      });
      expect(await second.guard.run(job, () => 'again')).toEqual({ executed: false, reason: 'slot-done' });
      expect(await first.guard.run(job, () => 'again')).toEqual({ executed: false, reason: 'slot-done' });
      // An explicit slot wins over the one `cron` gives.
      expect(await second.guard.run({ ...job, slot: new Date('2099-01-01T00:00:00Z') }, (ctx) => ctx.slot?.toISOString())).toEqual({
        executed: true,
        value: '2099-01-01T00:00:00.000Z',
      });
    });

    it('shares the watermark with fires that carry their slot (guard.schedule, guard.run with `slot`) and with decorated calls', async () => {
      const { guard } = await migratedGuard(target);
      const slot = new Date(Date.UTC(new Date().getUTCFullYear(), 0, 1));
      // What a guard.schedule fire of the same expression does: guard.run with node-cron's slot.
      expect(await guard.run({ name: 'shared', lockAtMostFor: '1m', slot }, () => 'scheduled')).toEqual({
        executed: true,
        value: 'scheduled',
      });
      expect(await guard.run({ name: 'shared', lockAtMostFor: '1m', ...YEARLY }, () => 'called')).toEqual({
        executed: false,
        reason: 'slot-done',
      });
      const decorate = guard.guarded({ name: 'shared', lockAtMostFor: '1m', ...YEARLY });
      const descriptor: PropertyDescriptor = { value: async () => 'decorated' };
      decorate({}, 'method', descriptor);
      expect(await (descriptor.value as () => Promise<unknown>)()).toBeUndefined();
      expect((await guard.history({ job: 'shared' })).runs.filter((run) => run.status !== 'skipped')).toHaveLength(1);
    });
  });
});

describe('a guard.schedule fire and a `cron` call of the same expression name the same slot', () => {
  it('on the replica clock, at every fire', async () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    const slots = guard.resolveJob({ name: 'same', lockAtMostFor: '5s', cron: '* * * * * *' }).cron;
    const pairs: [string | undefined, string | undefined][] = [];
    try {
      await guard.migrate();
      guard.schedule('* * * * * *', { name: 'same', lockAtMostFor: '5s' }, (ctx) => {
        pairs.push([ctx.slot?.toISOString(), slots?.slotAt(new Date()).toISOString()]);
      });
      await expect.poll(() => pairs.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    } finally {
      await guard.shutdown();
    }
    for (const [scheduled, computed] of pairs) expect(computed).toBe(scheduled);
  });
});

type IntervalMessage =
  | { type: 'ready' }
  | { type: 'exiting' }
  | { type: 'ran'; pid: number; slot: string | null; start: number }
  | { type: 'result'; executed: boolean; reason: string | null }
  | ({ type: 'held'; pid: number } & LockHold)
  | ({ type: 'skipped'; pid: number } & ReportedRefusal);
type IntervalRan = Extract<IntervalMessage, { type: 'ran' }>;

describe('a plain setInterval caller with `cron` set', () => {
  const RUN_FOR_MS = 10_000;
  it('gets one run per slot across 3 processes, on every dialect at once', async () => {
    const targets = dialectTargets().filter((target) => target.serverUrl !== null);
    const started = await Promise.all(
      targets.map(async (target) => {
        const url = databaseUrl(target);
        const prefix = uniquePrefix();
        await guardOn(url, prefix).guard.migrate();
        // Three phases within the second, one near its end (a call that may claim the coming second).
        return {
          target,
          workers: [50, 450, 960].map((phase) =>
            startWorker<IntervalMessage>('interval-replica.ts', [url, prefix, String(phase), String(RUN_FOR_MS)]),
          ),
        };
      }),
    );
    const workersOf = started.flatMap(({ workers }) => workers);
    await Promise.all(workersOf.map((worker) => worker.next('ready')));
    const startAt = Date.now() + 500;
    for (const worker of workersOf) worker.send({ startAt });
    const runs = await Promise.all(
      started.map(async ({ target, workers }) => {
        await Promise.all(workers.map((worker) => worker.next('exiting')));
        const received = workers.flatMap((worker) => worker.received);
        return {
          target: target.name,
          runs: received.filter((m): m is IntervalRan => m.type === 'ran'),
          skips: received.flatMap((m) => (m.type === 'result' && !m.executed ? [m.reason] : [])),
          refusals: received.flatMap((m) => (m.type === 'skipped' ? [m] : [])),
          holds: received.flatMap((m) => (m.type === 'held' ? [m] : [])),
        };
      }),
    );
    for (const { target, runs: ran, skips, refusals, holds } of runs) {
      const slots = ran.map((run) => run.slot);
      expect(slots, target).not.toContain(null);
      const times = [...new Set(slots as string[])].map((slot) => Date.parse(slot)).sort((a, b) => a - b);
      // Duplicates: none, ever.
      expect(slots.length, `${target}: ${slots.join(', ')}`).toBe(times.length);
      // Every second inside the window ran (the first and last seconds, while processes start and stop, excluded).
      const first = times[0] ?? 0;
      const last = times.at(-1) ?? 0;
      const missing: string[] = [];
      for (let t = first + 1_000; t < last; t += 1_000) if (!times.includes(t)) missing.push(new Date(t).toISOString());
      // A call that comes while another slot's run still holds the lock is skipped as `locked`, and
      // nobody calls that slot again; a call that comes once a later second's run has started finds
      // it `slot-done`: on a loaded machine such a second goes unrun. Any other refusal of a missing
      // second is a bug; a second no call fell in (every replica's timer late past it), at most one.
      const explained = (refusal: ReportedRefusal): boolean => explainedByOtherSlots(refusal, holds, ran);
      // Every run's hold was reported (the rule rests on them).
      expect(runsWithoutHold(ran, holds)).toEqual([]);
      const refusedMissing = refusals.filter((refusal) => refusal.slot !== null && missing.includes(refusal.slot));
      expect(
        refusedMissing.filter((refusal) => !explained(refusal)),
        `${target}: missing ${missing.join(', ')}; refusals ${JSON.stringify(refusedMissing)}; holds ${JSON.stringify(holds)}`,
      ).toEqual([]);
      const uncalled = missing.filter((slot) => !refusedMissing.some((refusal) => refusal.slot === slot));
      expect(uncalled.length, `${target}: missing ${missing.join(', ')}; skips ${skips.join(', ')}`).toBeLessThanOrEqual(1);
      expect(last - first, target).toBeGreaterThanOrEqual(6_000);
      // The other processes called too, each second, and were turned away by the slot watermark
      // (or by the lock, while the winner ran): about two skips per run.
      expect(skips.length, target).toBeGreaterThanOrEqual(ran.length);
      expect(
        skips.filter((reason) => reason !== 'slot-done' && reason !== 'locked'),
        target,
      ).toEqual([]);
    }
  }, 120_000);
});
