// The internal fire timeline (src/core/fire-timeline.ts, issue #34): a subscriber to the
// diagnostics channel sees each step of a guard.schedule fire, in order, with its slot: node-cron's
// timer, its call of the task, the acquire queued, the batch sent (naming every job of the slot),
// the answer. The bench's tick timeline (test/bench/fire-timeline.ts) is built on it.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { setTimeout as sleep } from 'node:timers/promises';
import { createGuard } from '../src/index.js';
import { FIRE_TIMELINE_CHANNEL, type FireStepNote } from '../src/core/fire-timeline.js';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { recordingLogger } from './support/guards.js';

eachDialectAtOnce(
  'publishes each step of a scheduled fire, in order, with its slot, before the body starts',
  async ({ target, expect }) => {
    const notes: FireStepNote[] = [];
    const listener = (note: unknown): void => void notes.push(note as FireStepNote);
    subscribe(FIRE_TIMELINE_CHANNEL, listener);
    const logger = recordingLogger();
    const prefix = uniquePrefix();
    const guard = createGuard({ database: databaseUrl(target), tablePrefix: prefix, logger });
    closeWhenTestEnds(async () => {
      unsubscribe(FIRE_TIMELINE_CHANNEL, listener);
      await guard.close();
    });
    await guard.migrate();
    // Job names of this case only: the other dialects' cases publish on the same channel at once.
    const names = ['a', 'b', 'c'].map((letter) => `${prefix}-${letter}`);
    const bodies = new Map<string, number>();
    while (Date.now() % 1_000 > 200) await sleep(20);
    for (const name of names) {
      guard.schedule('* * * * * *', { name, lockAtMostFor: '30s' }, (ctx) => {
        bodies.set(`${name}@${ctx.slot?.getTime()}`, performance.timeOrigin + performance.now());
      });
    }
    // A slot every job ran.
    const slotRunByAll = (): number | undefined => {
      const slots = [...bodies.keys()].map((key) => Number(key.split('@')[1]));
      return slots.find((slot) => names.every((name) => bodies.has(`${name}@${slot}`)));
    };
    await expect.poll(slotRunByAll, { timeout: 15_000 }).toBeDefined();
    const slot = slotRunByAll() as number;
    const ours = notes.filter((note) => note.slot === slot && note.names.some((name) => names.includes(name)));
    const first = (step: FireStepNote['step'], name?: string): number =>
      Math.min(...ours.filter((note) => note.step === step && (name === undefined || note.names.includes(name))).map((note) => note.at));
    // The slot's first timer fired every task due then (slot-fires.ts): its call, then the acquires.
    expect(first('timer')).toBeLessThanOrEqual(first('fire'));
    expect(first('fire')).toBeLessThanOrEqual(first('queued'));
    // The acquires of the slot went as one batch, which names every job.
    expect(ours.some((note) => note.step === 'sent' && names.every((name) => note.names.includes(name)))).toBe(true);
    for (const name of names) {
      expect(first('queued', name)).toBeLessThanOrEqual(first('sent', name));
      expect(first('sent', name)).toBeLessThanOrEqual(first('answered', name));
      expect(first('answered', name)).toBeLessThanOrEqual(bodies.get(`${name}@${slot}`) as number);
    }
    expect(logger.errors).toEqual([]);
  },
);
