import { expect } from 'vitest';
import type { Guard, RunResult } from '../../src/index.js';
import type { RecordingLogger } from './guards.js';

/**
 * Runs `names` on `guard` at once, each body returning its name, and lets every body end in the
 * same turn of the event loop once all have started: their releases go as one batch where the
 * dialect batches them. `beforeEnding` runs once all have started, before any body ends.
 */
export async function runEndingTogether(
  guard: Guard,
  names: readonly string[],
  beforeEnding?: () => Promise<void>,
): Promise<RunResult<string>[]> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let started = 0;
  const runs = Promise.all(
    names.map((name) =>
      guard.run({ name, lockAtMostFor: '1m' }, async () => {
        started += 1;
        await gate;
        return name;
      }),
    ),
  );
  await expect.poll(() => started).toBe(names.length);
  await beforeEnding?.();
  open();
  return runs;
}

/**
 * Runs 'first', 'good-0', 'bad', 'good-1' ending together, where the database refuses to finish
 * the run of 'bad' (a trigger the caller created): the batched release fails as a whole, and each
 * job is released alone; the good ones are, 'bad' reports its failure and keeps its lock.
 */
export async function expectFailingReleaseAlone(guard: Guard, other: Guard, logger: RecordingLogger): Promise<void> {
  const names = ['first', 'good-0', 'bad', 'good-1'];
  expect(await runEndingTogether(guard, names)).toEqual(names.map((name) => ({ executed: true, value: name })));
  // Each good job was released alone after the batch failed, with its run finished.
  for (const name of ['first', 'good-0', 'good-1']) {
    expect(await other.run({ name, lockAtMostFor: '1m' }, () => 'next'), name).toEqual({ executed: true, value: 'next' });
  }
  const { runs: history } = await guard.history({ limit: 50 });
  expect(history.filter((run) => run.job.startsWith('good') && run.status === 'succeeded')).toHaveLength(4);
  // The bad one failed alone, after its own retries, and said so; its lock is still held.
  expect(logger.errors.join('\n')).toContain('Releasing the lock of job "bad" failed');
  expect(logger.errors.join('\n')).not.toMatch(/job "(first|good-0|good-1)"/);
  expect(await other.run({ name: 'bad', lockAtMostFor: '1m' }, () => 'next')).toEqual({ executed: false, reason: 'locked' });
}
