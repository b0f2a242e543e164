// Catch-up at start runs the newest missed slot strictly before the first slot the schedule fires
// itself: a replica that starts scheduling 100 ms before a slot fires that slot itself and never
// takes it as its catch-up (the one before it is the candidate); 100 ms after a slot, that slot
// (which node-cron will not fire) is the catch-up.
import { setTimeout as sleep } from 'node:timers/promises';
import { it, type ExpectStatic } from 'vitest';
import type { ExecutionContext, Guard } from '../src/index.js';
import { eachDialectSideBySide } from './support/dialects-at-once.js';
import { migratedGuard } from './support/guards.js';

/** Returns once the wall clock is `at` or just past it (sleeps most of the way, then spins). */
async function waitUntil(at: number): Promise<number> {
  if (at - Date.now() > 300) await sleep(at - Date.now() - 300);
  while (Date.now() < at) {
    // Spin: a timer may fire late, and the test is about 100 ms.
  }
  return Date.now();
}

interface Attempt {
  boundary: number;
  /** guard.schedule was called at, and returned at: the catch-up's instant is between. */
  calledAt: number;
  returnedAt: number;
  runs: { slot: number; catchUp: boolean }[];
}

/** A job whose watermark is three slots before a boundary, scheduled with catchUp `offsetMs` from the boundary. */
async function attempt(guard: Guard, name: string, offsetMs: number, expect: ExpectStatic): Promise<Attempt> {
  const job = { name, lockAtMostFor: '10s', lockAtLeastFor: 0 };
  // The first whole second at least a second away: time for the run below, then the wait to the boundary.
  const boundary = Math.ceil((Date.now() + 1_000) / 1_000) * 1_000;
  expect((await guard.run({ ...job, slot: new Date(boundary - 3_000) }, () => 'ran')).executed).toBe(true);
  const runs: Attempt['runs'] = [];
  const record = (ctx: ExecutionContext): void => void runs.push({ slot: ctx.slot?.getTime() ?? 0, catchUp: ctx.catchUp });
  const calledAt = await waitUntil(boundary + offsetMs);
  const task = guard.schedule('* * * * * *', { ...job, catchUp: '1m' }, record);
  const returnedAt = Date.now();
  // Long enough for the slot after the boundary to fire and run.
  await sleep(boundary + 1_700 - Date.now());
  await task.destroy();
  return { boundary, calledAt, returnedAt, runs };
}

eachDialectSideBySide('catch-up at start around a slot on $name', (target) => {
  it('100 ms before a slot: never takes the coming slot as its catch-up', async ({ expect }) => {
    const { guard } = await migratedGuard(target);
    // Loads and warms what a first guard.schedule does, so that the call takes a few ms.
    await attempt(guard, 'warm-up', 300, expect);
    const conclusive: Attempt[] = [];
    for (let index = 0; index < 5 && conclusive.length === 0; index += 1) {
      const result = await attempt(guard, `before-${index}`, -100, expect);
      // Conclusive only when the call returned before the boundary (a busy machine may delay it).
      if (result.returnedAt < result.boundary) conclusive.push(result);
    }
    const [result] = conclusive;
    expect(result, 'a guard.schedule call that returned before its boundary').toBeDefined();
    const { boundary, runs } = result as Attempt;
    // The catch-up, when it ran (a slot fired meanwhile makes it slot-done), is the slot before the boundary.
    expect(runs.filter((run) => run.catchUp).map((run) => run.slot - boundary)).not.toContain(0);
    for (const run of runs.filter((entry) => entry.catchUp)) expect(run.slot - boundary).toBe(-1_000);
    for (const slot of [boundary - 1_000, boundary, boundary + 1_000])
      expect(runs.filter((run) => run.slot === slot).length).toBeLessThanOrEqual(1);
  });

  it('100 ms after a slot: that slot is the catch-up, and the next fires as scheduled', async ({ expect }) => {
    const { guard } = await migratedGuard(target);
    const { boundary, runs } = await attempt(guard, 'after', 100, expect);
    expect(runs.filter((run) => run.catchUp)).toEqual([{ slot: boundary, catchUp: true }]);
    expect(runs.filter((run) => run.slot === boundary - 1_000)).toEqual([]);
    expect(runs.filter((run) => run.slot === boundary + 1_000 && run.catchUp)).toEqual([]);
  });
});
