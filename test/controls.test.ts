// Operator controls (issue 17) in one process, on every dialect: pause, resume, pause --until,
// trigger, auto-pause, the audit, and locks(). Across OS processes: operator-controls.test.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { openRaw } from './support/raw-database.js';
import { triggerChannel } from '../src/dialects/postgres/trigger-channel.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';

describe.each(dialectTargets())('operator controls on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('skips a paused job with reason "paused" and a skipped event, logs nothing, and runs it again once resumed', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target, { lockedBy: 'ops-a' });
      const other = guardOn(url, prefix).guard;
      const job = { name: 'report', lockAtMostFor: '1m' };
      expect((await guard.run(job, () => 1)).executed).toBe(true);
      const skips: unknown[] = [];
      other.on('skipped', (event) => skips.push(event));
      const paused = await guard.pause('report', { reason: 'warehouse migration' });
      expect(paused).toMatchObject({ until: null, reason: 'warehouse migration', by: 'ops-a' });
      for (let i = 0; i < 3; i += 1) expect(await other.run(job, () => 'ran')).toEqual({ executed: false, reason: 'paused' });
      // A scheduled attempt too, and one that would have taken the lock without a probe.
      expect(await other.run({ ...job, slot: new Date(Date.now() + 60_000) }, () => 'ran')).toEqual({
        executed: false,
        reason: 'paused',
      });
      expect(await guard.run(job, () => 'ran')).toEqual({ executed: false, reason: 'paused' });
      expect(skips).toHaveLength(4);
      expect(skips[0]).toEqual({ job: 'report', slot: null, reason: 'paused' });
      expect(logger.warnings).toEqual([]);
      const [lock] = await guard.locks();
      expect(lock?.paused).toMatchObject({ until: null, reason: 'warehouse migration', by: 'ops-a' });
      expect(await other.resume('report', { by: 'ops-b' })).toBe(true);
      expect(await other.run(job, () => 'ran')).toEqual({ executed: true, value: 'ran' });
      expect((await guard.locks())[0]?.paused).toBeNull();
      const audit = await guard.controls('report');
      expect(audit.map((entry) => [entry.action, entry.by, entry.reason])).toEqual([
        ['resume', 'ops-b', null],
        ['pause', 'ops-a', 'warehouse migration'],
      ]);
      expect(audit[0]?.at.getTime()).toBeGreaterThanOrEqual(audit[1]?.at.getTime() ?? Infinity);
    });

    it('pauses a job that has no lock row yet (created), and a pause with until lifts by itself', async () => {
      const { guard } = await migratedGuard(target);
      await guard.pause('not-deployed-yet', { until: '1500ms', reason: 'off until launch' });
      const [lock] = await guard.locks();
      expect(lock).toMatchObject({ name: 'not-deployed-yet', state: 'free', running: false });
      expect(lock?.paused?.until?.getTime()).toBeGreaterThan(Date.now());
      const job = { name: 'not-deployed-yet', lockAtMostFor: '1m' };
      expect(await guard.run(job, () => 1)).toEqual({ executed: false, reason: 'paused' });
      await expect.poll(async () => (await guard.run(job, () => 1)).executed, { timeout: 10_000, interval: 200 }).toBe(true);
      expect((await guard.locks())[0]?.paused).toBeNull();
    });

    it('refuses to trigger a paused job unless forced, and records triggers in the audit and on the row', async () => {
      const { guard } = await migratedGuard(target, { lockedBy: 'ops' });
      await guard.pause('nightly');
      await expect(guard.trigger('nightly')).rejects.toMatchObject({ name: 'GuardError', code: 'JOB_PAUSED' });
      const id = await guard.trigger('nightly', { force: true, by: 'alice' });
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect((await guard.locks())[0]?.pendingTrigger).toMatchObject({ by: 'alice', force: true });
      expect((await guard.controls('nightly')).map((entry) => [entry.action, entry.by, entry.reason])).toEqual([
        ['trigger', 'alice', 'forced'],
        ['pause', 'ops', null],
      ]);
      await expect(guard.pause('nightly', { until: 'soon' })).rejects.toThrow(TypeError);
      await expect(guard.trigger('nightly', { force: 'yes' as unknown as boolean })).rejects.toThrow(
        new TypeError('Expected `force` of job "nightly" to be a boolean, got "yes"'),
      );
    });

    it('runs a trigger once on one of the replicas that schedule the job, as a manual run that leaves the slot watermark alone', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { controlPollInterval: '200ms' });
      const replicas = [
        guard,
        guardOn(url, prefix, { controlPollInterval: '200ms' }).guard,
        guardOn(url, prefix, { controlPollInterval: '200ms' }).guard,
      ];
      const ran: number[] = [];
      const job = { name: 'yearly', lockAtMostFor: '1m' };
      // A slot already run, far in the past: the manual run must neither move it nor be refused by it.
      expect((await guard.run({ ...job, slot: new Date('2026-01-01T00:00:00Z') }, () => 0)).executed).toBe(true);
      replicas.forEach((replica, index) => replica.schedule('0 0 1 1 *', job, () => void ran.push(index)));
      await guard.trigger('yearly', { by: 'bob' });
      await expect.poll(() => ran.length, { timeout: 10_000 }).toBe(1);
      await sleep(1_000);
      expect(ran).toHaveLength(1);
      const { runs } = await guard.history({ job: 'yearly' });
      expect(runs.map((run) => [run.status, run.slot, run.triggeredBy])).toEqual([
        ['succeeded', null, 'bob'],
        ['succeeded', new Date('2026-01-01T00:00:00Z'), null],
      ]);
      expect((await guard.locks())[0]?.pendingTrigger).toBeNull();
      const raw = await openRaw(target.name, url);
      try {
        const [row] = await raw.query<{ last_slot: unknown }>(`SELECT last_slot FROM ${prefix}locks`);
        expect(new Date(row?.last_slot as string).toISOString()).toBe('2026-01-01T00:00:00.000Z');
      } finally {
        await raw.close();
      }
      // The scheduled slot it did not use up still runs once.
      expect((await guard.run({ ...job, slot: new Date('2027-01-01T00:00:00Z') }, () => 2)).executed).toBe(true);
    });

    it('leaves a trigger pending while the guard.schedule task is stopped, and runs it once the task starts again', async () => {
      const { guard } = await migratedGuard(target, { controlPollInterval: '200ms' });
      const ran: string[] = [];
      const task = guard.schedule('0 0 1 1 *', { name: 'stoppable', lockAtMostFor: '1m' }, () => void ran.push('ran'));
      await task.stop();
      await guard.trigger('stoppable', { by: 'carol' });
      // Five polls: a watched job would have run by now.
      await sleep(1_000);
      expect(ran).toEqual([]);
      expect((await guard.locks())[0]?.pendingTrigger).not.toBeNull();
      await task.start();
      await expect.poll(() => ran, { timeout: 10_000 }).toEqual(['ran']);
      await task.destroy();
    });

    it('pauses a job by itself after autoPause.afterFailures failed runs in a row, with a paused event and one warning', async () => {
      const { guard, logger } = await migratedGuard(target, { lockedBy: 'replica-1' });
      const job = { name: 'flaky', lockAtMostFor: '1m', autoPause: { afterFailures: 3 } };
      const paused: unknown[] = [];
      guard.on('paused', (event) => paused.push(event));
      // Each run lasts a few ms: runs in a row never share their start's millisecond (SQLite's clock).
      const fail = async (): Promise<never> => {
        await sleep(3);
        throw new Error('upstream down');
      };
      await expect(guard.run(job, fail)).rejects.toThrow('upstream down');
      await expect(guard.run(job, fail)).rejects.toThrow('upstream down');
      expect((await guard.run(job, () => sleep(3))).executed).toBe(true);
      for (let i = 0; i < 3; i += 1) await expect(guard.run(job, fail)).rejects.toThrow('upstream down');
      await expect.poll(() => paused.length).toBe(1);
      expect(paused[0]).toMatchObject({ job: 'flaky', by: 'replica-1', until: null, auto: true });
      expect(logger.warnings).toEqual([expect.stringContaining('Job "flaky" was auto-paused after 3 failed runs in a row')]);
      expect(await guard.run(job, fail)).toEqual({ executed: false, reason: 'paused' });
      const [entry] = await guard.controls('flaky');
      expect(entry).toMatchObject({
        action: 'auto-pause',
        by: 'replica-1',
        reason: expect.stringContaining('upstream down'),
      });
      await guard.resume('flaky');
      expect((await guard.run(job, () => 'ok')).executed).toBe(true);
    });

    it('pauses and resumes with the audit row in one transaction: when the audit row cannot be written, nothing changed', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { lockedBy: 'ops-a' });
      const job = { name: 'audited', lockAtMostFor: '1m' };
      expect((await guard.run(job, () => 1)).executed).toBe(true);
      const raw = await openRaw(target.name, url);
      const q = target.name === 'mysql' ? '`' : '"';
      const rename = (from: string, to: string) => raw.exec(`ALTER TABLE ${q}${prefix}${from}${q} RENAME TO ${q}${prefix}${to}${q}`);
      try {
        // The audit table out of the way: the audit row's INSERT fails after the pause's UPDATE.
        await rename('controls', 'controls_away');
        await expect(guard.pause('audited', { reason: 'maintenance' })).rejects.toThrow();
        expect((await guard.locks()).find((lock) => lock.name === 'audited')?.paused).toBeNull();
        expect((await guard.run(job, () => 2)).executed).toBe(true);
        await rename('controls_away', 'controls');
        await guard.pause('audited', { reason: 'maintenance' });
        await rename('controls', 'controls_away');
        await expect(guard.resume('audited')).rejects.toThrow();
        expect((await guard.locks()).find((lock) => lock.name === 'audited')?.paused).toMatchObject({ reason: 'maintenance' });
        await rename('controls_away', 'controls');
        expect((await guard.controls('audited')).map((entry) => entry.action)).toEqual(['pause']);
      } finally {
        await raw.close();
      }
    });

    it('counts for autoPause only the failed runs since the last resume', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { lockedBy: 'replica-1' });
      const job = { name: 'flaky-again', lockAtMostFor: '1m', autoPause: { afterFailures: 2 } };
      const paused: unknown[] = [];
      guard.on('paused', (event) => paused.push(event));
      const fail = (): Promise<never> => Promise.reject(new Error('upstream down'));
      for (let i = 0; i < 2; i += 1) await expect(guard.run(job, fail)).rejects.toThrow('upstream down');
      await expect.poll(() => paused.length, { timeout: 10_000 }).toBe(1);
      await guard.resume('flaky-again');
      // One failure after the resume: one in a row, not three.
      await expect(guard.run(job, fail)).rejects.toThrow('upstream down');
      // Shutdown waits for the count that follows the failure's release.
      await guard.shutdown();
      const other = guardOn(url, prefix, { lockedBy: 'replica-2' }).guard;
      expect((await other.locks()).find((lock) => lock.name === 'flaky-again')?.paused).toBeNull();
      expect(paused).toHaveLength(1);
      // A second failure since the resume pauses it again.
      const again: unknown[] = [];
      other.on('paused', (event) => again.push(event));
      await expect(other.run(job, fail)).rejects.toThrow('upstream down');
      // The count follows the release: on a busy machine, past expect.poll's default second.
      await expect.poll(() => again.length, { timeout: 10_000 }).toBe(1);
    });

    it('validates autoPause and controlPollInterval', async () => {
      const { guard } = await migratedGuard(target);
      await expect(guard.run({ name: 'x', lockAtMostFor: '1m', autoPause: { afterFailures: 0 } }, () => 1)).rejects.toThrow(
        new TypeError(
          'Expected `autoPause` of job "x" to be { afterFailures: n } with n a whole number from 1 to 1000, got { afterFailures: 0 }',
        ),
      );
      expect(() => guardOn('sqlite::memory:', 'p_', { controlPollInterval: '10ms' })).toThrow(
        new TypeError('Expected `controlPollInterval` to be a duration of at least 100 ms, got "10ms"'),
      );
    });
  });
});

describe.each(dialectTargets().filter((target) => target.name === 'postgres'))('trigger notifications on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    'listen on one connection only while the guard schedules something, and not after shutdown',
    async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const raw = await openRaw('postgres', url);
      const listening = async (): Promise<number> => {
        const channel = triggerChannel(resolveTableNames(prefix, postgresDialect));
        const rows = await raw.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_stat_activity WHERE query = ?`, [
          `LISTEN "${channel}"`,
        ]);
        return Number(rows[0]?.n);
      };
      try {
        expect(await listening()).toBe(0);
        const first = guard.schedule('0 0 1 1 *', { name: 'a', lockAtMostFor: '1m' }, () => 1);
        const second = guard.schedule('0 0 1 1 *', { name: 'b', lockAtMostFor: '1m' }, () => 1);
        await expect.poll(listening).toBe(1);
        first.destroy();
        await sleep(200);
        expect(await listening()).toBe(1);
        second.destroy();
        await expect.poll(listening).toBe(0);
        guard.schedule('0 0 1 1 *', { name: 'a', lockAtMostFor: '1m' }, () => 1);
        await expect.poll(listening).toBe(1);
        await guard.shutdown();
        await expect.poll(listening).toBe(0);
      } finally {
        await raw.close();
      }
    },
  );
});
