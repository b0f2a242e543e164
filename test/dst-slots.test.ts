// DST nights in Europe/Berlin (2026: spring-forward 29 March at 01:00Z, 02:00 CET → 03:00 CEST;
// fall-back 25 October at 01:00Z, 03:00 CEST → 02:00 CET). The fires of an expression follow Vixie
// cron's rule: a wildcard expression fires every real minute once (both occurrences of the repeated
// hour), a fixed time fires once (the first occurrence; in a gap, at the jump). node-cron 4.6 read a
// local time as one instant: it skipped the repeated hour's first occurrence and a time in the gap,
// and the ledger, on the same matcher, expected no slot there (0 missed for a skipped hour).
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createScheduleStore } from '../src/admin/job-schedules.js';
import { resolveCronSlots, type CronSlots } from '../src/core/cron-slots.js';
import type { Dialect } from '../src/core/dialect.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import { sqliteDialect } from '../src/dialects/sqlite/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { migratedGuard } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';

const ZONE = 'Europe/Berlin';
const MINUTE = 60_000;
const DIALECTS: Record<string, Dialect<never>> = {
  mysql: mysqlDialect as Dialect<never>,
  postgres: postgresDialect as Dialect<never>,
  sqlite: sqliteDialect as Dialect<never>,
};

/** The job's slots in Berlin (`cron` is given, so they are defined). */
function berlinSlots(expression: string): CronSlots {
  const slots = resolveCronSlots(expression, ZONE, 'dst');
  if (slots === undefined) throw new Error('no slots');
  return slots;
}

/** The first `count` fires of `expression` in Berlin strictly after `after` (ISO), as UTC ISO minutes. */
function firesAfter(expression: string, after: string, count: number): string[] {
  const cron = berlinSlots(expression);
  const fires: string[] = [];
  let at = new Date(after);
  for (let index = 0; index < count; index += 1) {
    at = cron.fireAfter(at);
    fires.push(at.toISOString().slice(0, 16));
  }
  return fires;
}

/** Every minute of [from, to) (ISO), as Dates. */
function minutes(from: string, to: string): Date[] {
  const all: Date[] = [];
  for (let at = Date.parse(from); at < Date.parse(to); at += MINUTE) all.push(new Date(at));
  return all;
}

describe('fires on DST nights (Europe/Berlin)', () => {
  it('fall-back: every real minute once, the repeated hour twice on the wall clock', () => {
    // 02:58, 02:59 CEST, then 02:00 CET: the hour repeats, its real minutes fire again.
    expect(firesAfter('* * * * *', '2026-10-25T00:57:00Z', 4)).toEqual([
      '2026-10-25T00:58',
      '2026-10-25T00:59',
      '2026-10-25T01:00',
      '2026-10-25T01:01',
    ]);
    // The first occurrence of 02:00–02:59 (CEST, 00:00Z–00:59Z) fires: node-cron went from 01:59 CEST to 02:00 CET.
    expect(firesAfter('* * * * *', '2026-10-24T23:58:00Z', 3)).toEqual(['2026-10-24T23:59', '2026-10-25T00:00', '2026-10-25T00:01']);
    expect(firesAfter('0 * * * *', '2026-10-24T22:30:00Z', 5)).toEqual([
      '2026-10-24T23:00',
      '2026-10-25T00:00',
      '2026-10-25T01:00',
      '2026-10-25T02:00',
      '2026-10-25T03:00',
    ]);
    expect(firesAfter('*/20 * * * * *', '2026-10-25T00:59:30Z', 3).length).toBe(3);
  });

  it('fall-back: a fixed time fires once, at its first occurrence; 01:30 is no repeated time in Berlin', () => {
    // 02:30 CEST (00:30Z), not 02:30 CET (01:30Z, node-cron's choice), and not both.
    expect(firesAfter('30 2 * * *', '2026-10-24T12:00:00Z', 2)).toEqual(['2026-10-25T00:30', '2026-10-26T01:30']);
    expect(firesAfter('30 1 * * *', '2026-10-24T12:00:00Z', 2)).toEqual(['2026-10-24T23:30', '2026-10-26T00:30']);
  });

  it('spring-forward: a fixed time in the gap fires once at the jump; wildcards go on with the real minutes', () => {
    // 02:30 does not exist on 29 March: it runs at 03:00 CEST (01:00Z). node-cron skipped the day.
    expect(firesAfter('30 2 * * *', '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T01:00', '2026-03-30T00:30']);
    expect(firesAfter('0,30 2 * * *', '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T01:00', '2026-03-30T00:00']);
    expect(firesAfter('0 3 * * *', '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T01:00', '2026-03-30T01:00']);
    expect(firesAfter('30 1 * * *', '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T00:30', '2026-03-29T23:30']);
    // From the last second before the jump, and from the jump itself: a ledger range starting there, a task started then.
    const daily = berlinSlots('30 2 * * *');
    expect(daily.fireAfter(new Date('2026-03-29T00:59:58Z')).toISOString()).toBe('2026-03-29T01:00:00.000Z');
    expect(daily.fireAfter(new Date('2026-03-29T00:59:59Z')).toISOString()).toBe('2026-03-29T01:00:00.000Z');
    expect(daily.fireAfter(new Date('2026-03-29T00:59:59.900Z')).toISOString()).toBe('2026-03-29T01:00:00.000Z');
    expect(daily.fireAfter(new Date('2026-03-29T01:00:00Z')).toISOString()).toBe('2026-03-30T00:30:00.000Z');
    // 01:59 CET, then 03:00 CEST: the next real minute.
    expect(firesAfter('* * * * *', '2026-03-29T00:58:00Z', 3)).toEqual(['2026-03-29T00:59', '2026-03-29T01:00', '2026-03-29T01:01']);
    // An hourly half past: 01:30 CET, 03:30 CEST (no 02:30, which is no real time).
    expect(firesAfter('30 * * * *', '2026-03-29T00:00:00Z', 2)).toEqual(['2026-03-29T00:30', '2026-03-29T01:30']);
  });

  it('claims the slot of the real minute in the repeated hour, and the jump for a time in the gap', () => {
    const everyMinute = berlinSlots('* * * * *');
    expect(everyMinute.slotAt(new Date('2026-10-25T00:30:30Z')).toISOString()).toBe('2026-10-25T00:30:00.000Z');
    const daily = berlinSlots('30 2 * * *');
    expect(daily.slotAt(new Date('2026-03-29T01:00:30Z')).toISOString()).toBe('2026-03-29T01:00:00.000Z');
    expect(daily.slotAt(new Date('2026-10-25T01:45:00Z')).toISOString()).toBe('2026-10-25T00:30:00.000Z');
  });
});

describe('the ledger on DST nights (Europe/Berlin)', () => {
  eachDialectAtOnce('shows a skipped repeated hour as missed, and a run of every real minute as run', async ({ target, expect }) => {
    const { guard, url, prefix } = await migratedGuard(target);
    const dialect = DIALECTS[target.name] as Dialect<never>;
    const tables = resolveTableNames(prefix, dialect);
    const db = loggedKysely(target, url, []);
    try {
      const schedule = (name: string, expression: string) => ({
        name,
        expression,
        timezone: ZONE,
        lockAtMostForMs: MINUTE,
        lockAtLeastForMs: 0,
        catchUpMs: null,
      });
      await createScheduleStore(db, dialect, tables).declare(
        [
          schedule('skipped-hour', '* * * * *'),
          schedule('every-real-minute', '* * * * *'),
          schedule('fixed-fall', '30 2 * * *'),
          schedule('gap-skipped', '30 2 * * *'),
          schedule('gap-run', '30 2 * * *'),
        ],
        'replica',
      );
      // Declared (as of these expressions) before both nights; declared_at stays now (not retired).
      await sql`UPDATE ${sql.table(tables.jobs)} SET changed_at = ${dialect.reads.timeParameter(new Date('2026-03-01T00:00:00Z'))}`.execute(
        db,
      );
      // A run that started and succeeded on time (a second into its slot), as the guard writes it.
      let runs = 0;
      const time = (ms: number) => dialect.reads.timeParameter(new Date(ms));
      const run = async (name: string, slots: readonly Date[]) => {
        const rows = slots.map((slot) => {
          const at = slot.getTime();
          runs += 1;
          return sql`(${`dst-${runs}`}, ${name}, ${time(at)}, 'succeeded', 'replica', ${time(at + 1_000)}, ${time(at + 2_000)}, ${time(at + 2_000)})`;
        });
        await sql`INSERT INTO ${sql.table(tables.runs)} (id, job_name, slot, status, locked_by, started_at, finished_at, lock_until)
          VALUES ${sql.join(rows)}`.execute(db);
      };
      // 01:30 CEST to 02:30 CET (23:30Z to 01:30Z): 120 real minutes.
      const night = minutes('2026-10-24T23:30:00Z', '2026-10-25T01:30:00Z');
      const firstOccurrence = (slot: Date) => slot >= new Date('2026-10-25T00:00:00Z') && slot < new Date('2026-10-25T01:00:00Z');
      // What node-cron 4.6 ran: 01:59 CEST, then 02:00 CET.
      await run(
        'skipped-hour',
        night.filter((slot) => !firstOccurrence(slot)),
      );
      await run('every-real-minute', night);
      await run('fixed-fall', [new Date('2026-10-25T00:30:00Z')]);
      // 02:30 on 28 and 30 March (node-cron's runs: none on the 29th), and with the jump's run.
      const before = new Date('2026-03-28T01:30:00Z');
      const after = new Date('2026-03-30T00:30:00Z');
      await run('gap-skipped', [before, after]);
      await run('gap-run', [before, new Date('2026-03-29T01:00:00Z'), after]);

      const ledgerOf = async (job: string, since: string, until: string) => {
        const [ledger] = await guard.slots({ job, since: new Date(since), until: new Date(until) });
        if (ledger === undefined) throw new Error(`no ledger for ${job}`);
        return ledger;
      };
      const missedOf = (slots: readonly { slot: Date; outcome: string }[]) =>
        slots.filter((entry) => entry.outcome === 'missed').map((entry) => entry.slot.toISOString().slice(0, 16));

      const skipped = await ledgerOf('skipped-hour', '2026-10-24T23:30:00Z', '2026-10-25T01:30:00Z');
      expect(skipped.slots).toHaveLength(120);
      expect(skipped.counts).toMatchObject({ missed: 60, succeeded: 60 });
      expect(missedOf(skipped.slots)).toEqual(night.filter(firstOccurrence).map((slot) => slot.toISOString().slice(0, 16)));

      const full = await ledgerOf('every-real-minute', '2026-10-24T23:30:00Z', '2026-10-25T01:30:00Z');
      expect(full.slots.map((entry) => entry.slot.getTime())).toEqual(night.map((slot) => slot.getTime()));
      expect(full.counts).toMatchObject({ missed: 0, succeeded: 120 });

      const fixed = await ledgerOf('fixed-fall', '2026-10-24T12:00:00Z', '2026-10-25T12:00:00Z');
      expect(fixed.slots.map((entry) => [entry.slot.toISOString(), entry.outcome])).toEqual([['2026-10-25T00:30:00.000Z', 'succeeded']]);

      const gap = await ledgerOf('gap-skipped', '2026-03-28T00:00:00Z', '2026-03-30T12:00:00Z');
      expect(gap.slots.map((entry) => [entry.slot.toISOString().slice(0, 16), entry.outcome])).toEqual([
        ['2026-03-28T01:30', 'succeeded'],
        ['2026-03-29T01:00', 'missed'],
        ['2026-03-30T00:30', 'succeeded'],
      ]);
      const jump = await ledgerOf('gap-run', '2026-03-28T00:00:00Z', '2026-03-30T12:00:00Z');
      expect(jump.counts).toMatchObject({ missed: 0, succeeded: 3 });
    } finally {
      await db.destroy();
    }
  });
});
