// The slot ledger in one process, on every dialect: declared schedules, guard.slots, the missed
// and late events after a win, and the CLI's `slots`.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledQuery } from 'kysely';
import cron from 'node-cron';
import { describe } from 'vitest';
import type { GuardEventMap } from '../src/index.js';
import { databaseUrl } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { openRaw } from './support/raw-database.js';
import { cronguard } from './support/cronguard-cli.js';

const EVERY_SECOND = '* * * * * *';

/** A time column read raw: a Date, or text. */
function timeOf(value: unknown): number {
  return value instanceof Date ? value.getTime() : Date.parse(String(value));
}

/** The next whole second at least `leadMs` away. */
function wholeSecondIn(leadMs: number): number {
  return Math.ceil((Date.now() + leadMs) / 1_000) * 1_000;
}

// Each scenario runs on the three dialects at once (each its own tables): most wait on the clock.
describe('the slot ledger', () => {
  eachDialectAtOnce(
    'declares a scheduled job, updates a changed schedule, and keeps when it changed otherwise',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target);
      guard.schedule('0 3 * * *', { name: 'nightly', lockAtMostFor: '10m', timezone: 'Europe/Paris' }, () => undefined);
      const raw = await openRaw(target.name, url);
      try {
        const read = () =>
          raw.query<Record<string, unknown>>(`SELECT cron_expression, time_zone, lock_at_most_for_ms, changed_at FROM ${prefix}jobs`);
        await expect.poll(read).toHaveLength(1);
        const [first] = await read();
        expect(first).toMatchObject({ cron_expression: '0 3 * * *', time_zone: 'Europe/Paris' });
        expect(Number(first?.lock_at_most_for_ms)).toBe(600_000);
        // The same schedule from another replica: changed_at stays. A new expression moves it.
        const other = guardOn(url, prefix).guard;
        other.schedule('0 3 * * *', { name: 'nightly', lockAtMostFor: '20m', timezone: 'Europe/Paris' }, () => undefined);
        await expect.poll(async () => Number((await read())[0]?.lock_at_most_for_ms)).toBe(1_200_000);
        expect(timeOf((await read())[0]?.changed_at)).toBe(timeOf(first?.changed_at));
        await sleep(20);
        guardOn(url, prefix).guard.schedule(
          '0 4 * * *',
          { name: 'nightly', lockAtMostFor: '20m', timezone: 'Europe/Paris' },
          () => undefined,
        );
        await expect.poll(async () => (await read())[0]?.cron_expression).toBe('0 4 * * *');
        expect(timeOf((await read())[0]?.changed_at)).toBeGreaterThan(timeOf(first?.changed_at));
        const [ledger] = await guard.slots({ job: 'nightly' });
        expect(ledger).toMatchObject({ job: 'nightly', expression: '0 4 * * *', retired: false, slots: [] });
      } finally {
        await raw.close();
      }
    },
  );

  eachDialectAtOnce(
    'declares the schedules of one turn of the event loop in one statement, each with its own values',
    async ({ target, expect }) => {
      const log: CompiledQuery[] = [];
      // One URL for the guard's Kysely instance and the raw reads (on SQLite each URL is a file of its own).
      const url = databaseUrl(target);
      const db = loggedKysely(target, url, log);
      const { guard, prefix } = await migratedGuard(target, { database: db });
      log.length = 0;
      const name = (job: number): string => `declared-${String(job).padStart(2, '0')}`;
      for (let job = 0; job < 40; job += 1) {
        guard.schedule(`${job} 3 * * *`, { name: name(job), lockAtMostFor: `${job + 1}m` }, () => undefined);
      }
      const raw = await openRaw(target.name, url);
      try {
        const read = () =>
          raw.query<Record<string, unknown>>(
            `SELECT name, cron_expression, lock_at_most_for_ms FROM ${prefix}jobs ORDER BY cron_expression`,
          );
        await expect.poll(read).toHaveLength(40);
        const rows = (await read()).map((row) => [String(row.name), row.cron_expression, Number(row.lock_at_most_for_ms)]);
        const declared = Array.from({ length: 40 }, (_, job) => [name(job), `${job} 3 * * *`, (job + 1) * 60_000]);
        expect(rows.sort()).toEqual(declared.sort());
        expect(log.filter((query) => /^\s*INSERT INTO\s+["`]?\w+_jobs\b/i.test(query.sql))).toHaveLength(1);
      } finally {
        await raw.close();
        // The guard before the Kysely instance it was given (closing twice waits for the first).
        await guard.close();
        await db.destroy();
      }
    },
  );

  eachDialectAtOnce('gives each expected slot one outcome, and tells of the gap once, on the run after it', async ({ target, expect }) => {
    const { guard, url, prefix, logger } = await migratedGuard(target);
    const job = { name: 'ticker', lockAtMostFor: '1m', cron: EVERY_SECOND };
    // A decorated job with `cron` declares its schedule when decorated; runs here give their slots by hand.
    guard.guarded(job);
    await expect.poll(async () => (await guard.slots({ job: 'ticker' })).length).toBe(1);
    const missed: GuardEventMap['missed'][0][] = [];
    guard.on('missed', (event) => missed.push(event));
    const first = wholeSecondIn(1_500);
    const at = (index: number): Date => new Date(first + index * 1_000);
    const plain = { name: 'ticker', lockAtMostFor: '1m' };
    await guard.run({ ...plain, slot: at(0) }, () => 'ok');
    // Slots 1 and 2: nobody ran them. Slot 3 fails, 4 is cancelled-free success.
    await expect(guard.run({ ...plain, slot: at(3) }, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await guard.run({ ...plain, slot: at(4) }, () => 'ok');
    await expect.poll(() => missed.length).toBe(1);
    expect(missed[0]).toMatchObject({ job: 'ticker', count: 2, slots: [at(1), at(2)], slot: at(3) });
    expect(logger.warnings.filter((line) => line.includes('missed'))).toHaveLength(1);
    const raw = await openRaw(target.name, url);
    try {
      const rows = await raw.query<{ missed_slots: number | string | null }>(
        `SELECT missed_slots FROM ${prefix}runs WHERE missed_slots IS NOT NULL`,
      );
      expect(rows.map((row) => Number(row.missed_slots))).toEqual([2]);
    } finally {
      await raw.close();
    }
    // Wait until the slots have settled (lateAfter, 1 s, after the last one), then read the ledger.
    await sleep(Math.max(0, first + 6_500 - Date.now()));
    const [ledger] = await guard.slots({ job: 'ticker', since: at(0), until: at(5) });
    expect(ledger?.slots.map((entry) => entry.outcome)).toEqual(['succeeded', 'missed', 'missed', 'failed', 'succeeded']);
    expect(ledger?.counts).toMatchObject({ succeeded: 2, missed: 2, failed: 1 });
    // `cronguard slots`: the same ledger, and exit 1 since slots were missed.
    const common = ['--database', url, '--table-prefix', prefix, '--job', 'ticker', '--since', '1h'];
    const json = await cronguard(['slots', ...common, '--json']);
    expect(json.code).toBe(1);
    const [printed] = JSON.parse(json.stdout) as { slots: { slot: string; outcome: string }[] }[];
    const listed = new Map(printed?.slots.map((entry) => [entry.slot, entry.outcome]));
    expect([0, 1, 2, 3, 4].map((index) => listed.get(at(index).toISOString()))).toEqual([
      'succeeded',
      'missed',
      'missed',
      'failed',
      'succeeded',
    ]);
    const text = await cronguard(['slots', ...common]);
    expect(text.stdout).toMatch(/^JOB +SCHEDULE +SLOTS +SUCCEEDED +LATE +MISSED/);
    expect(text.stdout).toContain(`ticker: ${at(1).toISOString().slice(0, 19).replace('T', ' ')} UTC missed`);
  });

  eachDialectAtOnce(
    'does not take the slot the running replicas are taking as a catch-up when a replica joins (catchUp)',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target);
      const joiner = guardOn(url, prefix).guard;
      // Connections open first, so that the steps below take milliseconds.
      await guard.run({ name: 'warm', lockAtMostFor: '1m' }, () => 1);
      await joiner.run({ name: 'warm', lockAtMostFor: '1m' }, () => 1);
      // Just after a fire of a every-10-seconds job: the previous slot ran, the current one (P) is being taken.
      // The joiner may take P only once its lateAfter (1 s) has passed: a loaded machine that made the
      // steps below that slow makes P missed indeed, and its catch-up right. Such a try is not
      // conclusive (its catch-up must have started after lateAfter), and the next slot is tried.
      const slotMs = 10_000;
      const lateAfter = 1_000;
      const tries: { current: number; catchUps: { slot: number; startedAt: number }[] }[] = [];
      for (let attempt = 0; attempt < 3; attempt += 1) {
        await sleep(slotMs - (Date.now() % slotMs) + 100);
        const current = Math.floor(Date.now() / slotMs) * slotMs;
        const name = `joined-${attempt}`;
        await guard.run({ name, lockAtMostFor: '1m', slot: new Date(current - slotMs) }, () => 1);
        const catchUps: { slot: number; startedAt: number }[] = [];
        const task = joiner.schedule('*/10 * * * * *', { name, lockAtMostFor: '1m', catchUp: '1h' }, (ctx) => {
          if (ctx.catchUp) catchUps.push({ slot: ctx.slot?.getTime() ?? 0, startedAt: Date.now() });
        });
        await sleep(1_500);
        await task.destroy();
        tries.push({ current, catchUps });
        // Taken as a catch-up within its lateAfter: while the running replicas were still taking it.
        expect(catchUps.filter((catchUp) => catchUp.startedAt <= current + lateAfter)).toEqual([]);
        if (catchUps.length > 0) continue;
        const { runs } = await guard.history({ job: name });
        expect(runs.map((run) => run.slot?.getTime())).toEqual([current - slotMs]);
        break;
      }
      expect(
        tries.filter((done) => done.catchUps.length === 0),
        JSON.stringify(tries),
      ).toHaveLength(1);
    },
  );

  eachDialectAtOnce(
    'declares a node-cron task that runs through the coordinator, from its expression and time zone',
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target);
      const task = cron.schedule('* * * * * *', () => undefined, {
        name: 'coordinated',
        timezone: 'America/New_York',
        distributed: true,
        runCoordinator: guard.coordinator({ lockAtMostFor: '10s' }),
      });
      try {
        await expect
          .poll(async () => (await guard.slots({ job: 'coordinated' }))[0], { timeout: 10_000 })
          .toMatchObject({
            expression: '* * * * * *',
            timezone: 'America/New_York',
          });
      } finally {
        await task.destroy();
      }
    },
  );

  eachDialectAtOnce(
    'shows the slots that fell while a job was paused as paused, and tells of no missed slot for them',
    async ({ target, expect }) => {
      const { guard, logger } = await migratedGuard(target);
      const missed: GuardEventMap['missed'][0][] = [];
      guard.on('missed', (event) => missed.push(event));
      const ran: number[] = [];
      const task = guard.schedule(EVERY_SECOND, { name: 'pausable', lockAtMostFor: '1m' }, (ctx) => {
        if (ctx.slot !== null) ran.push(ctx.slot.getTime());
      });
      let pausedAt: number;
      let resumedAt: number;
      try {
        await expect.poll(() => ran.length, { timeout: 15_000 }).toBeGreaterThan(0);
        pausedAt = (await guard.pause('pausable', { reason: 'test' })).at.getTime();
        // About 3 slots fall while paused.
        await sleep(3_500);
        await guard.resume('pausable');
        resumedAt = Date.now();
        await expect.poll(() => ran.filter((slot) => slot > resumedAt).length, { timeout: 15_000 }).toBeGreaterThanOrEqual(2);
        // The gap check after the first run past the pause runs off the hot path: let it finish.
        await sleep(1_000);
      } finally {
        await task.destroy();
      }
      // A stalled machine can drop a fire outside the pause (node-cron skips a timer that fires too
      // late): that slot is missed, told and counted as such. No slot of the pause may be, and no
      // slot told missed ran.
      const inPause = (slot: number): boolean => slot >= pausedAt && slot <= resumedAt;
      const told = missed.flatMap((event) => event.slots.map((slot) => slot.getTime()));
      const described = `missed events: ${JSON.stringify(missed)}; paused ${pausedAt} to ${resumedAt}`;
      expect(told.filter(inPause), described).toEqual([]);
      expect(
        told.filter((slot) => ran.includes(slot)),
        described,
      ).toEqual([]);
      const warnedRanges = logger.warnings.flatMap((line) => {
        const [, from, to] = /missed \d+ slot\(s\) from (\S+) to (\S+?):/.exec(line) ?? [];
        return from === undefined || to === undefined ? [] : [[Date.parse(from), Date.parse(to)] as const];
      });
      expect(logger.warnings.filter((line) => line.includes('missed')).length, described).toBe(warnedRanges.length);
      expect(
        warnedRanges.filter(([from, to]) => to >= pausedAt && from <= resumedAt),
        described,
      ).toEqual([]);
      const first = ran[0] as number;
      const last = ran.at(-1) as number;
      const [ledger] = await guard.slots({ job: 'pausable', since: new Date(first), until: new Date(last + 1) });
      const outcomes = ledger?.slots ?? [];
      const paused = outcomes.filter((entry) => entry.outcome === 'paused').map((entry) => entry.slot.getTime());
      expect(paused.length).toBeGreaterThanOrEqual(3);
      for (const slot of paused) expect(slot >= pausedAt - 1_000 && slot <= resumedAt + 1_000).toBe(true);
      expect(
        outcomes.filter((entry) => entry.outcome === 'missed').map((entry) => entry.slot.getTime()),
        described,
      ).toEqual(told.filter((slot) => slot >= first && slot <= last).sort((a, b) => a - b));
      expect(ledger?.counts.paused).toBe(paused.length);
    },
  );

  eachDialectAtOnce(
    'fires late once for a run that started more than lateAfter after its slot, without a log line',
    async ({ target, expect }) => {
      const { guard, logger } = await migratedGuard(target);
      guard.guarded({ name: 'slow-start', lockAtMostFor: '1m', cron: '0 * * * * *' });
      const late: GuardEventMap['late'][0][] = [];
      guard.on('late', (event) => late.push(event));
      const slot = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 60_000);
      await guard.run({ name: 'slow-start', lockAtMostFor: '1m', slot }, () => 'ok');
      expect(late).toHaveLength(1);
      expect(late[0]).toMatchObject({ job: 'slow-start', slot, lateAfterMs: 6_000 });
      expect(late[0]?.delayMs).toBeGreaterThan(60_000);
      expect(logger.warnings).toEqual([]);
    },
  );
});
