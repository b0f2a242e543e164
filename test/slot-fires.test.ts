// guard.schedule's tasks due at one slot fire together at the first of them (issue 19): their
// acquires go to the database at once, as one batch, not one alone and the rest at the end of
// node-cron's timers phase. Each still runs once per slot; a stopped task, or one whose expression
// does not fire at that slot, is not fired by another's timer.
import type { CompiledQuery } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import { schedule as scheduleTask } from 'node-cron';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { RUNNER } from '../src/integrations/decorators/guarded.js';
import { resolveCronSlots } from '../src/core/cron-slots.js';
import { SlotFires } from '../src/integrations/node-cron/slot-fires.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { recordingLogger } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';

/** The statement's bound values as text (mysql2 gets strings as bytes from a Kysely passed in). */
function boundText(query: CompiledQuery): string {
  return JSON.stringify(query.parameters.map((value) => (value instanceof Uint8Array ? Buffer.from(value).toString() : value)));
}

/** A guard on a Kysely that logs every statement, closed (with its Kysely) when the case ends. */
async function loggedGuard(target: Parameters<typeof loggedKysely>[0]): Promise<{ guard: Guard; log: CompiledQuery[] }> {
  const log: CompiledQuery[] = [];
  const kysely = loggedKysely(target, databaseUrl(target), log);
  const guard = createGuard({ database: kysely, tablePrefix: uniquePrefix(), logger: recordingLogger() });
  closeWhenTestEnds(async () => {
    await guard.close();
    await kysely.destroy();
  });
  await guard.migrate();
  return { guard, log };
}

eachDialectAtOnce(
  'fires the tasks due at one slot together: one batch sent at the first fire, each job once per slot, never a stopped or not-due task',
  async ({ target, expect }) => {
    const { guard, log } = await loggedGuard(target);
    const skipped: string[] = [];
    guard.on('skipped', ({ job, reason }) => void skipped.push(`${job}: ${reason}`));
    // Scheduled early in a second, so that the schedules' own writes are done before the first fire.
    while (Date.now() % 1_000 > 200) await sleep(20);
    const names = ['fire-a', 'fire-b', 'fire-c', 'fire-d', 'fire-e'];
    const runs: string[] = [];
    for (const name of names)
      guard.schedule('* * * * * *', { name, lockAtMostFor: '30s' }, (ctx) => void runs.push(`${name}@${ctx.slot?.getTime()}`));
    const stopped = guard.schedule('* * * * * *', { name: 'stopped', lockAtMostFor: '30s' }, () => void runs.push('stopped'));
    await stopped.stop();
    guard.schedule('0 0 1 1 *', { name: 'new-year', lockAtMostFor: '30s' }, () => void runs.push('new-year'));
    await sleep(400);
    log.splice(0);
    // Three slots run.
    await expect.poll(() => new Set(runs.map((run) => run.split('@')[1])).size, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    // The first statement of the first tick that names one of the jobs names all five: the
    // acquires went as one batch (before, the first fire's went alone, the others after it).
    const first = log.find((query) => names.some((name) => boundText(query).includes(name)));
    expect(first === undefined ? [] : names.filter((name) => boundText(first).includes(name))).toEqual(names);
    // Each job once per slot (its own timer found the slot fired already and sent no second acquire).
    const slots = [...new Set(runs.map((run) => run.split('@')[1]))].slice(0, 2);
    for (const slot of slots) expect(runs.filter((run) => run.endsWith(`@${slot}`)).sort()).toEqual(names.map((name) => `${name}@${slot}`));
    expect(runs.filter((run) => !run.startsWith('fire-'))).toEqual([]);
    expect(skipped).toEqual([]);
  },
  60_000,
);

describe.each(dialectTargets())('acquires announced together on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('sends the announced acquires as one batch once the last has come, and one that never comes holds the others only to the end of the turn', async () => {
      const { guard, log } = await loggedGuard(target);
      expect((await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
      log.splice(0);
      const runner = guard[RUNNER];
      runner.expectTogether(['one', 'two', 'three']);
      const together = await Promise.all(['one', 'two', 'three'].map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
      expect(together.map((result) => result.executed)).toEqual([true, true, true]);
      // The first statement naming one of them names all three (else 'one' would have gone alone).
      const first = log.find((query) => ['one', 'two', 'three'].some((name) => boundText(query).includes(name)));
      expect(first === undefined ? [] : ['one', 'two', 'three'].filter((name) => boundText(first).includes(name))).toEqual([
        'one',
        'two',
        'three',
      ]);
      // 'never' is announced but not run: the others still run (sent at the end of the turn).
      runner.expectTogether(['four', 'five', 'never']);
      const rest = await Promise.all(['four', 'five'].map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
      expect(rest).toEqual([
        { executed: true, value: 'four' },
        { executed: true, value: 'five' },
      ]);
    });
  });
});

describe('SlotFires', () => {
  it('fires every started task due at a slot once, at the first of them, and never a slot older than one a task was fired for', async () => {
    // Real node-cron tasks on an expression that does not fire while the test runs; the slots are fired by hand.
    const expression = '0 0 1 1 *';
    const cron = resolveCronSlots(expression, 'UTC', 'test');
    if (cron === undefined) throw new Error('no slots');
    const fired: string[] = [];
    const announced: string[][] = [];
    const fires = new SlotFires((names) => void announced.push([...names]));
    const tasks = ['a', 'b', 'c'].map((name) => {
      const task = scheduleTask(expression, () => undefined, { name, timezone: 'UTC' });
      const entry = fires.add({ name, task, cron, fire: async (slot) => void fired.push(`${name}@${slot.getUTCFullYear()}`) });
      return { task, entry };
    });
    const [a, b, c] = tasks;
    if (a === undefined || b === undefined || c === undefined) throw new Error('no tasks');
    try {
      const year = (y: number): Date => new Date(Date.UTC(y, 0, 1));
      await fires.fire(a.entry, year(2031));
      expect(fired).toEqual(['a@2031', 'b@2031', 'c@2031']);
      expect(announced).toEqual([['a', 'b', 'c']]);
      // b's own timer for that slot: the fire already made.
      await fires.fire(b.entry, year(2031));
      // c's timer for an older slot, come late: nothing fires (before, it fired a and b backwards).
      await fires.fire(c.entry, year(2030));
      expect(fired).toHaveLength(3);
      // A stopped task is not fired by another's timer; it starts again from the next slot on.
      await b.task.stop();
      await fires.fire(a.entry, year(2032));
      expect(fired.slice(3)).toEqual(['a@2032', 'c@2032']);
      // A task whose previous fire has not ended (its acquire still under way) fires on its own timer only.
      let endSlow!: () => void;
      const slow = scheduleTask(expression, () => undefined, { name: 'slow', timezone: 'UTC' });
      tasks.push({
        task: slow,
        entry: fires.add({
          name: 'slow',
          task: slow,
          cron,
          fire: (slot) => (fired.push(`slow@${slot.getUTCFullYear()}`), new Promise<void>((resolve) => (endSlow = resolve))),
        }),
      });
      await fires.fire(a.entry, year(2034));
      expect(fired.slice(5)).toEqual(['a@2034', 'c@2034', 'slow@2034']);
      await fires.fire(a.entry, year(2035));
      expect(fired.slice(8)).toEqual(['a@2035', 'c@2035']);
      endSlow();
      await new Promise((resolve) => setImmediate(resolve));
      await fires.fire(a.entry, year(2036));
      expect(fired.slice(10)).toEqual(['a@2036', 'c@2036', 'slow@2036']);
      endSlow();
      // A slot the expression does not fire at fires only the task whose timer said so.
      await fires.fire(c.entry, new Date(Date.UTC(2037, 5, 1)));
      expect(fired.slice(13)).toEqual(['c@2037']);
    } finally {
      for (const { task } of tasks) await task.destroy();
    }
  });
});
