// The releases of jobs that end in the same turn of the event loop go to the database together
// where the dialect batches them (issue 19). Each keeps its own token match, its own
// lockAtLeastFor, its own run outcome, and a lock lost meanwhile is still told apart. Run on every
// dialect: the outcomes are the same whether the store batches releases or not.
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { sqlitePath } from '../src/dialects/sqlite/connection.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { countingPostgresPool } from './support/postgres-statements.js';
import { expectFailingReleaseAlone, runEndingTogether } from './support/ending-together.js';
import { openRaw } from './support/raw-database.js';
import { recordStatements } from './support/sqlite-statements.js';

/** A token no execution of the guard has: the lock row of a job "taken by someone else". */
const OTHER_TOKEN = '00000000-0000-4000-8000-000000000000';

/** Runs each job on `guard`, its body waiting for one gate; resolves once every body runs, `end` opens the gate. */
async function gatedRuns(guard: Guard, jobs: readonly { name: string; lockAtLeastFor?: string; fails?: boolean }[]) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let running = 0;
  const results = Promise.allSettled(
    jobs.map(({ name, lockAtLeastFor, fails }) =>
      guard.run({ name, lockAtMostFor: '1m', ...(lockAtLeastFor === undefined ? {} : { lockAtLeastFor }) }, async () => {
        running += 1;
        await gate;
        if (fails === true) throw new Error(`${name} broke: "quoted", back\\slash,\nnew line, é 🦀`);
        return name;
      }),
    ),
  );
  await expect.poll(() => running, { timeout: 10_000 }).toBe(jobs.length);
  // All bodies end in the same turn of the event loop: their releases are one batch.
  return { end: () => (open(), results) };
}

/** A job name JSON has to escape, with characters beyond ASCII. */
const SHORT = 'short "é 🦀" \\ end';

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

    it('tells apart, by its own token, the one lock of the turn another execution holds now: lock-lost for it alone', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target);
      const raw = await openRaw(target.name, url);
      try {
        const lockLost: string[] = [];
        guard.on('lock-lost', ({ job, during }) => void lockLost.push(`${job}:${during}`));
        const jobs = [
          { name: 'ok', lockAtMostFor: '1m' },
          { name: 'kept', lockAtMostFor: '1m', lockAtLeastFor: '1m' },
          { name: 'fails', lockAtMostFor: '1m' },
          { name: 'lost', lockAtMostFor: '1m' },
          { name: 'fails-too', lockAtMostFor: '1m', lockAtLeastFor: '1m' },
        ];
        let finish!: () => void;
        const ended = new Promise<void>((resolve) => (finish = resolve));
        let running = 0;
        // Every body waits for the same promise: once it resolves, they all end in one turn.
        const results = Promise.allSettled(
          jobs.map((job) =>
            guard.run(job, async (ctx) => {
              running += 1;
              await ended;
              if (job.name.startsWith('fails')) throw new Error(`${job.name}: its own error`);
              return ctx.runId;
            }),
          ),
        );
        await expect.poll(() => running).toBe(jobs.length);
        // Meanwhile another execution took the lock of 'lost' (as after an expiry): its token changed.
        await raw.query(`UPDATE ${prefix}locks SET token = ? WHERE name = ?`, [OTHER_TOKEN, 'lost']);
        finish();
        const settled = await results;
        expect(settled.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'rejected']);
        expect(lockLost).toEqual(['lost:release']);
        expect(logger.warnings.join('\n')).toContain('lost');

        const { runs } = await guard.history({ limit: 50 });
        const runOf = (name: string) => runs.find((run) => run.job === name);
        expect(runOf('ok')).toMatchObject({ status: 'succeeded', error: null, overran: false });
        expect(runOf('kept')).toMatchObject({ status: 'succeeded', error: null, overran: false });
        expect(runOf('fails')).toMatchObject({ status: 'failed', error: 'fails: its own error', overran: false });
        expect(runOf('fails-too')).toMatchObject({ status: 'failed', error: 'fails-too: its own error', overran: false });
        expect(runOf('lost')).toMatchObject({ status: 'succeeded', error: null, overran: true });
        for (const run of runs) expect(run.finishedAt, run.job).not.toBeNull();

        // Each lock was given back as its own job asked: at once, or kept for its lockAtLeastFor;
        // the lost one is left to the execution that holds it now.
        const other = guardOn(url, prefix).guard;
        const next = await Promise.all(jobs.map((job) => other.run({ name: job.name, lockAtMostFor: '1m' }, () => 'again')));
        expect(next.map((result) => (result.executed ? 'ran' : result.reason))).toEqual(['ran', 'locked', 'ran', 'locked', 'locked']);
        const [lostRow] = await raw.query<{ token: string }>(`SELECT token FROM ${prefix}locks WHERE name = ?`, ['lost']);
        expect(lostRow?.token).toBe(OTHER_TOKEN);
      } finally {
        await raw.close();
      }
    });

    it('releases jobs ending together without history, answering each by its own token', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { history: false });
      const raw = await openRaw(target.name, url);
      try {
        const lockLost: string[] = [];
        guard.on('lock-lost', ({ job }) => void lockLost.push(job));
        let finish!: () => void;
        const ended = new Promise<void>((resolve) => (finish = resolve));
        let running = 0;
        const names = ['a', 'b', 'c'];
        const results = Promise.all(
          names.map((name) =>
            guard.run({ name, lockAtMostFor: '1m', lockAtLeastFor: name === 'c' ? '1m' : 0 }, async () => {
              running += 1;
              await ended;
              return name;
            }),
          ),
        );
        await expect.poll(() => running).toBe(names.length);
        await raw.query(`UPDATE ${prefix}locks SET token = ? WHERE name = ?`, [OTHER_TOKEN, 'b']);
        finish();
        expect((await results).map((result) => result.executed)).toEqual([true, true, true]);
        expect(lockLost).toEqual(['b']);
        const other = guardOn(url, prefix, { history: false }).guard;
        const next = await Promise.all(names.map((name) => other.run({ name, lockAtMostFor: '1m' }, () => name)));
        expect(next.map((result) => (result.executed ? 'ran' : result.reason))).toEqual(['ran', 'locked', 'locked']);
      } finally {
        await raw.close();
      }
    });

    it('keeps in a batch a job name and an error text that need escaping, each lockAtLeastFor to the millisecond, and reports the job whose token was taken as lost', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const lostEvents: string[] = [];
      guard.on('lock-lost', ({ job, during }) => void lostEvents.push(`${job}:${during}`));
      const runs = await gatedRuns(guard, [
        { name: 'kept', lockAtLeastFor: '50s' },
        { name: 'failing', fails: true },
        { name: SHORT },
        { name: 'lost' },
      ]);
      // Meanwhile, someone else took the lock of 'lost' (as after its expiry): its token no longer matches.
      const raw = await openRaw(target.name, url);
      try {
        await raw.query(`UPDATE ${prefix}locks SET token = ?, locked_by = ? WHERE name = ?`, ['someone-else', 'other', 'lost']);
      } finally {
        await raw.close();
      }
      const results = await runs.end();
      expect(results.map((result) => (result.status === 'fulfilled' ? result.value : String(result.reason)))).toEqual([
        { executed: true, value: 'kept' },
        expect.stringContaining('failing broke'),
        { executed: true, value: SHORT },
        { executed: true, value: 'lost' },
      ]);
      await expect.poll(() => lostEvents, { timeout: 10_000 }).toEqual(['lost:release']);

      const history = (await guard.history({ limit: 50 })).runs;
      const byJob = (job: string) => history.find((run) => run.job === job);
      expect(byJob('kept')).toMatchObject({ status: 'succeeded', error: null, overran: false });
      expect(byJob('failing')).toMatchObject({
        status: 'failed',
        error: 'failing broke: "quoted", back\\slash,\nnew line, é 🦀',
        overran: false,
      });
      expect(byJob(SHORT)).toMatchObject({ status: 'succeeded', error: null, overran: false });
      expect(byJob('lost')).toMatchObject({ status: 'succeeded', error: null, overran: true });
      for (const job of ['kept', 'failing', SHORT, 'lost']) {
        expect(byJob(job)?.finishedAt, job).toBeInstanceOf(Date);
        expect(byJob(job)?.durationMs, job).toBeGreaterThanOrEqual(0);
      }

      // Each lock as its own release left it: 'kept' held for lockAtLeastFor (50 s from when it was
      // taken) with nobody running; SHORT and 'failing' free; 'lost' still the other taker's.
      const locks = new Map((await guard.locks()).map((lock) => [lock.name, lock]));
      const kept = locks.get('kept');
      expect(kept).toMatchObject({ state: 'held', running: false });
      expect((kept?.lockUntil.getTime() ?? 0) - (kept?.lockedAt.getTime() ?? 0)).toBe(50_000);
      expect(locks.get(SHORT)).toMatchObject({ state: 'free', running: false });
      expect(locks.get('failing')).toMatchObject({ state: 'free', running: false });
      expect(locks.get('lost')).toMatchObject({ state: 'held', running: true, lockedBy: 'other' });

      const contender = guardOn(url, prefix).guard;
      const again = await Promise.all(
        ['kept', 'failing', SHORT, 'lost'].map((name) => contender.run({ name, lockAtMostFor: '1m' }, () => name)),
      );
      expect(again).toEqual([
        { executed: false, reason: 'locked' },
        { executed: true, value: 'failing' },
        { executed: true, value: SHORT },
        { executed: false, reason: 'locked' },
      ]);
    });
  });
});

const postgres = dialectTargets().find((target) => target.name === 'postgres');
const JOBS = 20;

describe.skipIf(postgres?.serverUrl === null || postgres === undefined)('releases ending together on postgres, counted', () => {
  it(`sends two statements for the releases of ${JOBS} jobs that end in the same turn: the first at once, the others together`, async () => {
    const { url, prefix } = await migratedGuard(postgres as NonNullable<typeof postgres>);
    // The guard's statements, counted on a pool of its own.
    const counted = countingPostgresPool(url);
    const { pool } = counted;
    const guard = createGuard({ database: pool, tablePrefix: prefix, logger: { warn: () => undefined, error: () => undefined } });
    const names = Array.from({ length: JOBS }, (_, index) => `job-${index}`);
    try {
      const round = async (): Promise<number> => {
        let before = 0;
        const results = await runEndingTogether(guard, names, async () => {
          // Background work after a first lock (the replica's version row) is done before counting.
          await sleep(200);
          before = counted.count();
        });
        expect(results.every((result) => result.executed)).toBe(true);
        return counted.count() - before;
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
      await expectFailingReleaseAlone(guard, other, logger);
    } finally {
      await raw.close();
    }
  });
});

const sqlite = dialectTargets().find((target) => target.name === 'sqlite');

describe.skipIf(sqlite === undefined)('batched releases on sqlite', () => {
  const target = sqlite as NonNullable<typeof sqlite>;

  it('sends the releases of one turn as one batch transaction, a bounded number of statements whatever the number of jobs', async () => {
    const database = new Database(sqlitePath(databaseUrl(target)));
    const guard = createGuard({ database, tablePrefix: uniquePrefix() });
    const recorder = recordStatements(database);
    try {
      await guard.migrate();
      const sent = new Map<number, string[]>();
      for (const count of [3, 10, 40]) {
        const runs = await gatedRuns(
          guard,
          Array.from({ length: count }, (_, index) => ({ name: `job-${count}-${index}` })),
        );
        recorder.take();
        const results = await runs.end();
        expect(results.every((result) => result.status === 'fulfilled' && result.value.executed)).toBe(true);
        // Without the replica's own presence row, written in the background.
        sent.set(
          count,
          recorder.take().filter((text) => !/_replicas"/.test(text)),
        );
      }
      // The first release of the turn goes at once, alone (core/tick-batch.ts), then the others
      // together: one batch whatever N. Each is BEGIN, the lock rows, the run rows, COMMIT.
      for (const [count, statements] of sent) {
        expect(
          statements.filter((text) => text.includes('json_each')),
          String(count),
        ).toHaveLength(2);
        expect(statements.length, String(count)).toBeLessThanOrEqual(8);
      }
      const history = (await guard.history({ limit: 100 })).runs;
      expect(history.filter((run) => run.status === 'succeeded' && !run.overran)).toHaveLength(53);
      expect((await guard.locks()).every((lock) => lock.state === 'free' && !lock.running)).toBe(true);
    } finally {
      recorder.stop();
      await guard.close();
      database.close();
    }
  });

  it("releases the other jobs of the turn when one job's part of the batch fails, and leaves that one's lock to expire", async () => {
    const { guard, url, prefix, logger } = await migratedGuard(target);
    const raw = await openRaw('sqlite', url);
    try {
      // The database refuses to finish one job's run row: the batch fails as a whole, rolled back,
      // and each release is retried alone.
      await raw.exec(`CREATE TRIGGER ${prefix}refuse BEFORE UPDATE OF status ON ${prefix}runs
        WHEN NEW.job_name = 'bad' AND NEW.status <> 'running' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
      const names = ['good-0', 'bad', 'good-1', 'good-2'];
      const runs = await gatedRuns(
        guard,
        names.map((name) => ({ name })),
      );
      const results = await runs.end();
      expect(results.every((result) => result.status === 'fulfilled' && result.value.executed)).toBe(true);
      const locks = new Map((await guard.locks()).map((lock) => [lock.name, lock]));
      for (const name of ['good-0', 'good-1', 'good-2']) expect(locks.get(name), name).toMatchObject({ state: 'free', running: false });
      expect(locks.get('bad')).toMatchObject({ state: 'held', running: true });
      expect(logger.errors.join('\n')).toContain('refused by the test');
      const history = (await guard.history({ limit: 50 })).runs;
      expect(
        history
          .filter((run) => run.status === 'succeeded')
          .map((run) => run.job)
          .sort(),
      ).toEqual(['good-0', 'good-1', 'good-2']);
    } finally {
      await raw.close();
    }
  });
});
