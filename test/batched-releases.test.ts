// The releases of jobs that end in the same turn of the event loop go to the database together
// where the dialect batches them (issue 19). Each keeps its own token match, its own
// lockAtLeastFor, its own run outcome, and a lock lost meanwhile is still told apart. Run on every
// dialect: the outcomes are the same whether the store batches releases or not.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { openRaw } from './support/raw-database.js';

describe.each(dialectTargets())('releases ending together on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('gives each job its own outcome, lockAtLeastFor and lost-lock answer', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target);
      const other = guardOn(url, prefix).guard;
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let started = 0;
      const body =
        (value: string, fail = false) =>
        async (): Promise<string> => {
          started += 1;
          await gate;
          if (fail) throw new Error(`boom from ${value}`);
          return value;
        };
      const runs = [
        guard.run({ name: 'kept', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, body('kept')),
        guard.run({ name: 'free', lockAtMostFor: '1m' }, body('free')),
        guard.run({ name: 'fails', lockAtMostFor: '1m' }, body('fails', true)),
        guard.run({ name: 'lost', lockAtMostFor: '1s' }, body('lost')),
      ];
      await expect.poll(() => started).toBe(4);
      // The short lock expires and another replica takes it (and releases it): the holder's token is gone.
      await sleep(1_200);
      await expect
        .poll(async () => (await other.run({ name: 'lost', lockAtMostFor: '1m' }, () => 'other')).executed, { timeout: 10_000 })
        .toBe(true);
      // Every body ends in this turn: their releases are sent together.
      open();
      const settled = await Promise.allSettled(runs);
      expect(settled.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect(settled[2]?.status === 'rejected' ? String(settled[2].reason) : '').toContain('boom from fails');

      const { runs: history } = await guard.history({ limit: 50 });
      expect(history.find((run) => run.job === 'kept')).toMatchObject({ status: 'succeeded', overran: false, error: null });
      expect(history.find((run) => run.job === 'free')).toMatchObject({ status: 'succeeded', overran: false, error: null });
      expect(history.find((run) => run.job === 'fails')).toMatchObject({ status: 'failed', overran: false, error: 'boom from fails' });
      const lostRuns = history.filter((run) => run.job === 'lost');
      expect(lostRuns).toHaveLength(2);
      // The holder's run overran (its lock was taken over); the other replica's did not.
      expect(lostRuns.map((run) => run.overran).sort()).toEqual([false, true]);
      expect(lostRuns.every((run) => run.status === 'succeeded')).toBe(true);
      expect(logger.warnings.join('\n')).toContain('Job "lost" outlived its lock');
      expect(logger.warnings.join('\n')).not.toMatch(/Job "(kept|free|fails)"/);

      // lockAtLeastFor held for the job that asked for it, and only for it.
      expect(await other.run({ name: 'kept', lockAtMostFor: '1m' }, () => 'again')).toEqual({ executed: false, reason: 'locked' });
      expect(await other.run({ name: 'free', lockAtMostFor: '1m' }, () => 'again')).toEqual({ executed: true, value: 'again' });
      expect(await other.run({ name: 'fails', lockAtMostFor: '1m' }, () => 'again')).toEqual({ executed: true, value: 'again' });
    });
  });
});

const postgres = dialectTargets().find((target) => target.name === 'postgres');
const JOBS = 20;

describe.skipIf(postgres?.serverUrl === null || postgres === undefined)('releases ending together on postgres, counted', () => {
  it(`sends two statements for the releases of ${JOBS} jobs that end in the same turn: the first at once, the others together`, async () => {
    const { url, prefix } = await migratedGuard(postgres as NonNullable<typeof postgres>);
    // Every statement the guard's clients are asked to run, counted on its own pool.
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    let statements = 0;
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        statements += 1;
        return query(...args);
      };
    });
    const guard = createGuard({ database: pool, tablePrefix: prefix, logger: { warn: () => undefined, error: () => undefined } });
    const names = Array.from({ length: JOBS }, (_, index) => `job-${index}`);
    try {
      const round = async (): Promise<number> => {
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
        await expect.poll(() => started).toBe(JOBS);
        // Background work after a first lock (the replica's version row) is done before counting.
        await sleep(200);
        const before = statements;
        open();
        expect((await runs).every((result) => result.executed)).toBe(true);
        return statements - before;
      };
      await round();
      expect(await round()).toBe(2);
      const { runs } = await guard.history({ limit: 100 });
      expect(runs.filter((run) => run.status === 'succeeded')).toHaveLength(2 * JOBS);
    } finally {
      await guard.close();
      await pool.end();
    }
  });

  it("releases the other jobs of the turn when one job's part of the batch fails", async () => {
    const { guard, url, prefix, logger } = await migratedGuard(postgres as NonNullable<typeof postgres>);
    const other = guardOn(url, prefix).guard;
    const raw = await openRaw('postgres', url);
    try {
      // The database refuses to finish the run of one job: the batch's release fails as a whole, rolled back.
      await raw.exec(`CREATE FUNCTION ${prefix}refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
        CREATE TRIGGER ${prefix}refuse BEFORE UPDATE ON ${prefix}runs
          FOR EACH ROW WHEN (NEW.job_name = 'bad' AND NEW.finished_at IS NOT NULL) EXECUTE FUNCTION ${prefix}refuse();`);
      const names = ['first', 'good-0', 'bad', 'good-1'];
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
      open();
      expect(await runs).toEqual(names.map((name) => ({ executed: true, value: name })));
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
    } finally {
      await raw.close();
    }
  });
});
