// The job's context: currentExecution(), assertLocked(), and ctx.signal (deadline and shutdown).
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { assertLocked, createGuard, currentExecution, GuardError, type Guard } from '../src/index.js';
import { recordingLogger } from './support/guards.js';

const dir = mkdtempSync(join(tmpdir(), 'cronguard-context-'));
let counter = 0;
const guards: Guard[] = [];
afterEach(async () => {
  await Promise.all(guards.splice(0).map((guard) => guard.close()));
});

async function sqliteGuard(): Promise<Guard> {
  counter += 1;
  const guard = createGuard({
    database: `sqlite:${join(dir, `context-${counter}.sqlite`)}`,
    logger: recordingLogger(),
  });
  guards.push(guard);
  await guard.migrate();
  return guard;
}

describe('the execution context', () => {
  it('is current inside a run and a decorated method, and nowhere else', async () => {
    const guard = await sqliteGuard();
    expect(currentExecution()).toBeUndefined();
    expect(() => assertLocked()).toThrow(GuardError);
    const slot = new Date('2026-11-29T10:00:00.000Z');
    const seen = await guard.run({ name: 'inside', lockAtMostFor: '1m', slot }, async (ctx) => {
      await sleep(5);
      const current = currentExecution();
      return { same: current === ctx, name: current?.name, slot: current?.slot, locked: assertLocked() === ctx };
    });
    expect(seen).toEqual({ executed: true, value: { same: true, name: 'inside', slot, locked: true } });

    // Applied by hand (vitest's transform has no decorator syntax; test/decorators.test.ts compiles both modes).
    const descriptor: PropertyDescriptor = {
      value: async function work(): Promise<string> {
        await sleep(1);
        return assertLocked().name;
      },
    };
    guard.guarded({ name: 'decorated', lockAtMostFor: '1m' })({}, 'work', descriptor);
    expect(await (descriptor.value as () => Promise<string>)()).toBe('decorated');
    expect(currentExecution()).toBeUndefined();
  });

  it('aborts ctx.signal a stop margin before lockAtMostFor, counted from the acquire', async () => {
    const guard = await sqliteGuard();
    // lockAtMostFor 2.2 s: the margin is 1 s (at least 1 s), so the signal fires near 1.2 s.
    const result = await guard.run({ name: 'deadline', lockAtMostFor: 2_200 }, async (ctx) => {
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      return {
        firedAt: performance.now(),
        lockExpiresAt: ctx.lockExpiresAt,
        reason: (ctx.signal.reason as GuardError).code,
      };
    });
    if (!result.executed) throw new Error('expected a run');
    expect(result.value.reason).toBe('DEADLINE');
    // Not before the deadline (the expiry less the margin), and before the expiry: how late within
    // that second a busy machine fires the timer is not the test's business.
    expect(result.value.firedAt).toBeGreaterThanOrEqual(result.value.lockExpiresAt - 1_000);
    expect(result.value.firedAt).toBeLessThan(result.value.lockExpiresAt);
  });

  it('on shutdown aborts running jobs with SHUTDOWN, lets them finish and release, then refuses new runs', async () => {
    const guard = await sqliteGuard();
    const running = guard.run({ name: 'long', lockAtMostFor: '1m' }, async (ctx) => {
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      await sleep(100);
      return (ctx.signal.reason as GuardError).code;
    });
    await sleep(50);
    await guard.shutdown({ timeout: '5s' });
    expect(await running).toEqual({ executed: true, value: 'SHUTDOWN' });
    const after = await guard.run({ name: 'long', lockAtMostFor: '1m' }, () => 'late');
    expect(after).toMatchObject({ executed: false, reason: 'error', error: { code: 'GUARD_CLOSED' } });
  });

  it("keeps a running job's lock alive through shutdown: the signal aborts, keep-alive goes on", async () => {
    const guard = await sqliteGuard();
    const path = join(dir, `context-${counter}.sqlite`);
    const other = createGuard({ database: `sqlite:${path}`, logger: recordingLogger() });
    guards.push(other);
    const running = guard.run({ name: 'draining', lockAtMostFor: 1_500, keepAlive: true }, async (ctx) => {
      await sleep(2_500);
      return (ctx.signal.reason as GuardError | undefined)?.code;
    });
    await sleep(100);
    const stopping = guard.shutdown({ timeout: '10s' });
    await sleep(1_800);
    // Past the first lockAtMostFor, and the job still runs: another replica must still be refused.
    expect(await other.run({ name: 'draining', lockAtMostFor: '1m' }, () => 'overlap')).toEqual({
      executed: false,
      reason: 'locked',
    });
    await stopping;
    expect(await running).toEqual({ executed: true, value: 'SHUTDOWN' });
  });

  it('runs two guards on one better-sqlite3 Database without one transaction inside the other', async () => {
    const database = new Database(join(dir, 'shared.sqlite'));
    const first = createGuard({ database, tablePrefix: 'one_', logger: recordingLogger() });
    const second = createGuard({ database, tablePrefix: 'two_', logger: recordingLogger() });
    guards.push(first, second);
    await first.migrate();
    await second.migrate();
    const results = await Promise.all([
      first.run({ name: 'a', lockAtMostFor: '1m' }, () => sleep(5).then(() => 'one')),
      second.run({ name: 'a', lockAtMostFor: '1m' }, () => sleep(5).then(() => 'two')),
      first.run({ name: 'b', lockAtMostFor: '1m' }, () => 'one-b'),
    ]);
    expect(results).toEqual([
      { executed: true, value: 'one' },
      { executed: true, value: 'two' },
      { executed: true, value: 'one-b' },
    ]);
    await first.close();
    await second.close();
    database.close();
  });

  it('runs two guards with their own connections to one SQLite file in one process, without stalling each other', async () => {
    const path = join(dir, 'two-connections.sqlite');
    const first = createGuard({ database: `sqlite:${path}`, logger: recordingLogger() });
    const second = createGuard({ database: `sqlite:${path}`, logger: recordingLogger() });
    guards.push(first, second);
    await first.migrate();
    // Each transaction runs synchronously from BEGIN to COMMIT: one connection never holds the
    // write lock while the other blocks this thread in its busy wait. When it did, the waiter could
    // only give up (the holder cannot commit while the thread waits): an error skip after the busy
    // timeout, which is what this checks, not how long the 40 runs took.
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? first : second).run({ name: `job-${i % 10}`, lockAtMostFor: '1m' }, () => i)),
    );
    expect(results.filter((result) => !result.executed && result.reason === 'error')).toEqual([]);
  });

  it('close() during a run waits for it to release, so the lock is free for the next replica', async () => {
    const first = await sqliteGuard();
    const path = join(dir, `context-${counter}.sqlite`);
    const running = first.run({ name: 'closing', lockAtMostFor: '10m' }, () => sleep(300).then(() => 'done'));
    await sleep(50);
    await first.close();
    expect(await running).toEqual({ executed: true, value: 'done' });
    const next = createGuard({ database: `sqlite:${path}`, logger: recordingLogger() });
    guards.push(next);
    expect(await next.run({ name: 'closing', lockAtMostFor: '10m' }, () => 'next')).toEqual({
      executed: true,
      value: 'next',
    });
    expect((await next.history({ job: 'closing' })).runs.map((run) => run.status)).toEqual(['succeeded', 'succeeded']);
  });
});
