// doctor's diagnosis of one job from its runs: a pure function over history rows (the rows
// themselves come from every dialect in history.test.ts and cli.test.ts).
import { describe, expect, it } from 'vitest';
import { diagnoseJob } from '../src/admin/doctor.js';
import type { RunRecord } from '../src/admin/run-record.js';

const now = new Date('2026-11-29T12:00:00.000Z');

function run(hoursAgo: number, changes: Partial<RunRecord> = {}): RunRecord {
  const startedAt = new Date(now.getTime() - hoursAgo * 3_600_000);
  return {
    id: `run-${hoursAgo}`,
    job: 'nightly',
    slot: null,
    status: 'succeeded',
    lockedBy: 'replica-a',
    startedAt,
    finishedAt: new Date(startedAt.getTime() + 1_000),
    durationMs: 1_000,
    lockAtMostForMs: 60_000,
    lockUntil: new Date(startedAt.getTime() + 60_000),
    overran: false,
    error: null,
    triggeredBy: null,
    ...changes,
  };
}

describe('doctor', () => {
  it('counts every run read, but flags only what happened in the last day', () => {
    const old = diagnoseJob(
      'nightly',
      [run(1), run(30, { overran: true }), run(50, { status: 'abandoned', finishedAt: null, durationMs: null })],
      now,
    );
    expect(old).toMatchObject({ runs: 3, overran: 1, abandoned: 1, problems: [] });
    const recent = diagnoseJob(
      'nightly',
      [run(1, { overran: true }), run(2, { status: 'abandoned', finishedAt: null, durationMs: null })],
      now,
    );
    expect(recent.problems).toEqual(['in the last day 1 run(s) overran their lock', 'in the last day 1 run(s) abandoned']);
  });

  it("flags a daily job's abandoned run once the run that took over is recent", () => {
    // Yesterday's 02:00 run died; today's 02:00 run took over and marked it abandoned.
    const daily = diagnoseJob('nightly', [run(10), run(34, { status: 'abandoned', finishedAt: null, durationMs: null }), run(58)], now);
    expect(daily.problems).toEqual(['in the last day 1 run(s) abandoned']);
  });

  it('flags a run still running after its lock expired, however old', () => {
    const stuck = diagnoseJob('nightly', [run(48, { status: 'running', finishedAt: null, durationMs: null })], now);
    expect(stuck.problems).toEqual(["1 run(s) still 'running' after their lock expired"]);
  });
});
