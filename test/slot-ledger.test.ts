// The ledger's pure core: for random schedules (DST changes in Europe/Paris and America/New_York
// included) and random histories, every expected slot in the range has exactly one outcome.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveCronSlots } from '../src/core/cron-slots.js';
import {
  expectedSlots,
  lateAfterMs,
  pauseIntervals,
  SLOT_OUTCOMES,
  slotLedger,
  summarizeLedger,
  type LedgerRun,
  type PauseChangeRecord,
} from '../src/core/slot-ledger.js';

const ZONES = ['Europe/Paris', 'America/New_York', 'UTC'] as const;
/** DST changes of 2026: Paris 29 March and 25 October, New York 8 March and 1 November (UTC instants). */
const DST_CHANGES = ['2026-03-29T01:00:00Z', '2026-10-25T01:00:00Z', '2026-03-08T07:00:00Z', '2026-11-01T06:00:00Z'].map((iso) =>
  Date.parse(iso),
);

const expression = fc
  .tuple(
    fc.constantFrom('', '0 ', '*/15 ', '* ', '5,40 '),
    fc.constantFrom('*', '0', '*/5', '30', '0,30', '*/20'),
    fc.constantFrom('*', '2', '1-3', '*/2', '2,3', '0'),
    fc.constantFrom('*', '*', '1-31'),
  )
  .map(([seconds, minute, hour, day]) => `${seconds}${minute} ${hour} ${day} * *`);

const range = fc
  .tuple(fc.constantFrom(...DST_CHANGES), fc.integer({ min: -30 * 3_600, max: 6 * 3_600 }), fc.integer({ min: 1, max: 40 * 3_600 }))
  .map(([change, offsetS, lengthS]) => ({
    since: new Date(change + offsetS * 1_000 + 123),
    until: new Date(change + (offsetS + lengthS) * 1_000),
  }));

const STATUSES = ['running', 'succeeded', 'failed', 'cancelled', 'abandoned', 'skipped'] as const;

/** A history: for some expected slots a row (status, delay, duration), plus rows for slots no schedule has. */
function historyFor(slots: readonly Date[]): fc.Arbitrary<LedgerRun[]> {
  const row = (slot: Date, id: string) =>
    fc
      .record({
        status: fc.constantFrom(...STATUSES),
        delayS: fc.integer({ min: -2, max: 120 }),
        durationS: fc.option(fc.integer({ min: 0, max: 4_000 })),
        catchUp: fc.boolean(),
      })
      .map(({ status, delayS, durationS, catchUp }): LedgerRun => {
        const startedAt = new Date(slot.getTime() + delayS * 1_000);
        const finishedAt = durationS === null ? null : new Date(startedAt.getTime() + durationS * 1_000);
        return { id, slot, status, startedAt, finishedAt, lockUntil: new Date(startedAt.getTime() + 60_000), catchUp };
      });
  const picked = fc.subarray(
    slots.map((slot, index) => ({ slot, index })),
    { maxLength: Math.min(300, slots.length) },
  );
  const stray = fc.array(fc.integer({ min: 0, max: 10 ** 9 }), { maxLength: 20 });
  return fc
    .tuple(picked, stray)
    .chain(([chosen, strays]) =>
      fc.tuple(
        ...chosen.map(({ slot, index }) => row(slot, `run-${index}`)),
        ...strays.map((ms, index) => row(new Date(Date.UTC(2026, 0, 1) + ms * 37 + 1), `stray-${index}`)),
      ),
    );
}

/** Random pause changes (pause, auto-pause, resume, trigger) in and around the slots' range, oldest first. */
function pauseChangesFor(slots: readonly Date[]): fc.Arbitrary<PauseChangeRecord[]> {
  const from = (slots[0]?.getTime() ?? Date.UTC(2026, 0, 1)) - 3_600_000;
  const to = (slots.at(-1)?.getTime() ?? Date.UTC(2026, 0, 1)) + 3_600_000;
  return fc
    .array(
      fc.record({
        action: fc.constantFrom('pause', 'auto-pause', 'resume', 'trigger'),
        atMs: fc.integer({ min: from, max: to }),
        untilS: fc.option(fc.integer({ min: 1, max: 20_000 })),
      }),
      { maxLength: 8 },
    )
    .map((changes) =>
      changes
        .map(({ action, atMs, untilS }) => ({
          action,
          at: new Date(atMs),
          until: action === 'pause' && untilS !== null ? new Date(atMs + untilS * 1_000) : null,
        }))
        .sort((a, b) => a.at.getTime() - b.at.getTime()),
    );
}

describe('the slot ledger', () => {
  it('gives every expected slot of a random schedule exactly one outcome, across DST changes', () => {
    fc.assert(
      fc.property(
        expression,
        fc.constantFrom(...ZONES),
        range,
        fc.integer({ min: 0, max: 7_200_000 }),
        (cron, zone, { since, until }, lockAtLeastForMs) => {
          const slots = resolveCronSlots(cron, zone, 'job');
          if (slots === undefined) throw new Error('no slots');
          const cap = 500;
          const expected = expectedSlots(slots, since, until, cap);
          // The expected slots are fires of the expression, in the range, one after the other with
          // no fire left out between them (DST or not), and the newest ones when capped.
          expect(expected.slots.length).toBeLessThanOrEqual(cap);
          for (const [index, slot] of expected.slots.entries()) {
            expect(slot >= since && slot < until).toBe(true);
            const after = expected.slots[index + 1] ?? expected.following;
            expect(slots.fireAfter(slot)).toEqual(after);
          }
          expect(expected.following === null || expected.following >= until).toBe(true);
          const first = expected.slots[0];
          if (!expected.truncated && first !== undefined)
            expect(slots.fireAfter(new Date(Math.ceil(since.getTime() / 1_000) * 1_000 - 1_000))).toEqual(first);
          fc.assert(
            fc.property(historyFor(expected.slots), pauseChangesFor(expected.slots), (runs, changes) => {
              const pauses = pauseIntervals(changes);
              const ledger = slotLedger(expected.slots, expected.following, runs, lockAtLeastForMs, pauses);
              expect(ledger.map((entry) => entry.slot)).toEqual(expected.slots);
              const counts = summarizeLedger(ledger);
              expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(expected.slots.length);
              for (const entry of ledger) {
                expect(SLOT_OUTCOMES).toContain(entry.outcome);
                const ran = runs.find((run) => run.status !== 'skipped' && run.slot?.getTime() === entry.slot.getTime());
                const at = entry.slot.getTime();
                const inPause = pauses.some((pause) => pause.from.getTime() <= at && (pause.until === null || at < pause.until.getTime()));
                if (ran === undefined) {
                  // Unrun: paused exactly when the slot fell in a pause, else missed or overlapped.
                  if (inPause) expect(entry.outcome).toBe('paused');
                  else expect(['missed', 'overlapped']).toContain(entry.outcome);
                  expect(entry.runId).toBeNull();
                } else {
                  expect(entry.runId).toBe(ran.id);
                  expect(['missed', 'overlapped', 'paused']).not.toContain(entry.outcome);
                }
              }
            }),
            { numRuns: 5 },
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('says late only past a tenth of the interval, at least 1 s and at most 1 min', () => {
    expect(lateAfterMs(1_000)).toBe(1_000);
    expect(lateAfterMs(300_000)).toBe(30_000);
    expect(lateAfterMs(86_400_000)).toBe(60_000);
    const slots = [new Date(0), new Date(300_000)];
    const run = (id: string, slot: Date, delayMs: number): LedgerRun => ({
      id,
      slot,
      status: 'succeeded',
      startedAt: new Date(slot.getTime() + delayMs),
      finishedAt: new Date(slot.getTime() + delayMs + 10),
      lockUntil: null,
      catchUp: false,
    });
    const ledger = slotLedger(slots, new Date(600_000), [run('a', slots[0] as Date, 29_000), run('b', slots[1] as Date, 31_000)], 0);
    expect(ledger.map((entry) => entry.outcome)).toEqual(['succeeded', 'late']);
  });

  it('tells slots eaten by a held lock (overlapped) from slots nobody ran (missed)', () => {
    const slots = [0, 1, 2, 3, 4, 5].map((s) => new Date(s * 1_000));
    const runs: LedgerRun[] = [
      {
        id: 'a',
        slot: new Date(0),
        status: 'succeeded',
        startedAt: new Date(10),
        finishedAt: new Date(100),
        lockUntil: null,
        catchUp: false,
      },
    ];
    // lockAtLeastFor 2.5 s: slots 1 and 2 came while the lock was held; 3 to 5 nobody ran.
    expect(slotLedger(slots, new Date(6_000), runs, 2_500).map((entry) => entry.outcome)).toEqual([
      'succeeded',
      'overlapped',
      'overlapped',
      'missed',
      'missed',
      'missed',
    ]);
  });

  it('reads pause intervals from the audit: a pause ends at its until, a resume or the next pause', () => {
    const t = (s: number): Date => new Date(s * 1_000);
    const changes: PauseChangeRecord[] = [
      { action: 'pause', until: t(3), at: t(1) },
      { action: 'trigger', until: null, at: t(2) },
      { action: 'auto-pause', until: null, at: t(5) },
      { action: 'pause', until: null, at: t(7) },
      { action: 'resume', until: null, at: t(9) },
      { action: 'resume', until: null, at: t(10) },
      { action: 'pause', until: null, at: t(12) },
    ];
    expect(pauseIntervals(changes)).toEqual([
      { from: t(1), until: t(3) },
      { from: t(5), until: t(7) },
      { from: t(7), until: t(9) },
      { from: t(12), until: null },
    ]);
    // Slots in a pause and unrun are paused (even with a recorded skip), others missed.
    const slots = [0, 1, 2, 3, 4, 12, 13].map(t);
    const skip: LedgerRun = { id: 's', slot: t(2), status: 'skipped', startedAt: t(2), finishedAt: t(2), lockUntil: null, catchUp: false };
    expect(slotLedger(slots, t(14), [skip], 0, pauseIntervals(changes)).map((entry) => entry.outcome)).toEqual([
      'missed',
      'paused',
      'paused',
      'missed',
      'missed',
      'paused',
      'paused',
    ]);
  });

  it('covers at most the newest slots of a every-second job over a week, cheaply', () => {
    const slots = resolveCronSlots('* * * * * *', undefined, 'job');
    if (slots === undefined) throw new Error('no slots');
    const until = new Date(Date.UTC(2026, 5, 8));
    const expected = expectedSlots(slots, new Date(until.getTime() - 7 * 86_400_000), until);
    expect(expected.truncated).toBe(true);
    expect(expected.slots).toHaveLength(10_000);
    expect(expected.slots.at(-1)).toEqual(new Date(until.getTime() - 1_000));
  });
});
