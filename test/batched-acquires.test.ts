// The acquires a replica starts in the same turn of the event loop go to the database together where
// the dialect batches them (PostgreSQL: one probe, one take; issue 19). Each job keeps its own
// decision, token, run row and slot check, and one job's failure never fails the others'. Run on
// every dialect: the decisions are the same whether the store batches or not.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { sqlitePath } from '../src/dialects/sqlite/connection.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { countingPostgresPool } from './support/postgres-statements.js';
import { openRaw } from './support/raw-database.js';
import { untilStatementWaits } from './support/statement-waits.js';
import { recordStatements } from './support/sqlite-statements.js';
import { slotRace } from './support/slot-race.js';

const SLOT_1 = new Date(Date.UTC(2030, 0, 1, 0, 1));
const SLOT_2 = new Date(Date.UTC(2030, 0, 1, 0, 2));
const SLOT_3 = new Date(Date.UTC(2030, 0, 1, 0, 3));

describe.each(dialectTargets())('acquires started together on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('gives each job of one tick its own decision: paused, slot done, held, free, new', async () => {
      const { guard: operator, url, prefix } = await migratedGuard(target);
      const contender = guardOn(url, prefix).guard;
      await operator.run({ name: 'free', lockAtMostFor: '1m', slot: SLOT_1 }, () => undefined);
      await operator.run({ name: 'done', lockAtMostFor: '1m', slot: SLOT_2 }, () => undefined);
      await operator.run({ name: 'paused', lockAtMostFor: '1m' }, () => undefined);
      await operator.pause('paused');
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let holding = false;
      const holder = operator.run({ name: 'held', lockAtMostFor: '1m' }, () => ((holding = true), held));
      await expect.poll(() => holding).toBe(true);
      try {
        const names = ['paused', 'done', 'held', 'free', 'new', 'new-too'];
        const results = await Promise.all(
          names.map((name) => contender.run({ name, lockAtMostFor: '1m', slot: name === 'done' ? SLOT_1 : SLOT_3 }, (ctx) => ctx.runId)),
        );
        expect(results.map((result) => (result.executed ? 'ran' : result.reason))).toEqual([
          'paused',
          'slot-done',
          'locked',
          'ran',
          'ran',
          'ran',
        ]);
        // Each winner has its own run row, under its own token, for its own slot.
        const runIds = results.flatMap((result) => (result.executed ? [result.value] : []));
        expect(new Set(runIds).size).toBe(3);
        const { runs } = await contender.history({ limit: 50 });
        for (const [index, name] of ['free', 'new', 'new-too'].entries()) {
          const run = runs.find((entry) => entry.id === runIds[index]);
          expect(run, name).toMatchObject({ job: name, status: 'succeeded' });
          expect(run?.slot?.getTime(), name).toBe(SLOT_3.getTime());
        }
        // The slot watermark moved for each winner: the same slot again is done.
        const again = await Promise.all(
          ['free', 'new'].map((name) => contender.run({ name, lockAtMostFor: '1m', slot: SLOT_3 }, () => 'x')),
        );
        expect(again).toEqual([
          { executed: false, reason: 'slot-done' },
          { executed: false, reason: 'slot-done' },
        ]);
      } finally {
        release();
        await holder;
      }
    });

    it('answers why, as alone, each job of a tick that skipped the probe and lost the take: paused, slot done, held', async () => {
      // This guard released each lock itself last time, so its next acquires go straight to the take.
      const { guard, url, prefix } = await migratedGuard(target);
      for (const name of ['paused', 'done', 'held']) {
        expect((await guard.run({ name, lockAtMostFor: '1m', slot: SLOT_2 }, () => name)).executed).toBe(true);
      }
      await guard.pause('paused');
      const other = guardOn(url, prefix).guard;
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let holding = false;
      const holder = other.run({ name: 'held', lockAtMostFor: '1m' }, () => ((holding = true), held));
      await expect.poll(() => holding).toBe(true);
      try {
        const results = await Promise.all(
          ['paused', 'done', 'held', 'fresh'].map((name) =>
            guard.run({ name, lockAtMostFor: '1m', slot: name === 'done' ? SLOT_1 : SLOT_3 }, () => name),
          ),
        );
        expect(results).toEqual([
          { executed: false, reason: 'paused' },
          { executed: false, reason: 'slot-done' },
          { executed: false, reason: 'locked' },
          { executed: true, value: 'fresh' },
        ]);
      } finally {
        release();
        await holder;
      }
      // The losers wrote nothing: each lock row is as its own holder left it.
      const locks = new Map((await guard.locks()).map((lock) => [lock.name, lock]));
      expect(locks.get('paused')?.paused).not.toBeNull();
      const { runs } = await guard.history({ limit: 50 });
      expect(runs.map((run) => run.job).sort()).toEqual(['done', 'fresh', 'held', 'held', 'paused']);
    });

    it('marks abandoned, for each job a tick takes over, the run of a holder that never released', async () => {
      const { guard: stuck, url, prefix } = await migratedGuard(target);
      // A holder whose bodies outlive their 1 s locks (they ignore the signal) and never release in time.
      let unstick!: () => void;
      const stuckBodies = new Promise<void>((resolve) => (unstick = resolve));
      const names = ['left-0', 'left-1', 'left-2'];
      let started = 0;
      const stuckRuns = Promise.all(
        names.map((name) => stuck.run({ name, lockAtMostFor: '1s' }, async () => ((started += 1), await stuckBodies, name))),
      );
      await expect.poll(() => started).toBe(names.length);
      const successor = guardOn(url, prefix).guard;
      try {
        // Once the locks have expired, one tick of the successor takes them all.
        await expect
          .poll(async () => (await successor.locks()).filter((lock) => lock.state === 'free').length, { timeout: 20_000, interval: 200 })
          .toBe(names.length);
        const results = await Promise.all(names.map((name) => successor.run({ name, lockAtMostFor: '1m' }, () => name)));
        expect(results).toEqual(names.map((value) => ({ executed: true, value })));
        const { runs } = await successor.history({ limit: 50 });
        for (const name of names) {
          expect(
            runs
              .filter((run) => run.job === name)
              .map((run) => run.status)
              .sort(),
            name,
          ).toEqual(['abandoned', 'succeeded']);
        }
      } finally {
        unstick();
        await stuckRuns;
      }
    });

    it('creates again, for a tick, the rows of jobs deleted by hand after this guard released them', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target);
      const raw = await openRaw(target.name, url);
      try {
        const names = ['gone-0', 'gone-1', 'gone-2'];
        for (const name of names) expect((await guard.run({ name, lockAtMostFor: '1m' }, () => name)).executed).toBe(true);
        await raw.query(`DELETE FROM ${prefix}locks WHERE name IN (?, ?)`, ['gone-1', 'gone-2']);
        // The guard expects them free and sends the tick's last two straight to the batch take,
        // which finds no row for them: they must still run (their rows created), not be skipped.
        const results = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
        expect(results).toEqual(names.map((value) => ({ executed: true, value })));
        expect((await raw.query<{ name: unknown }>(`SELECT name FROM ${prefix}locks`)).length).toBe(3);
        expect(logger.errors).toEqual([]);
      } finally {
        await raw.close();
      }
    });

    it('gives exactly one run per (job, slot) to 4 processes racing for 24 jobs at once', async () => {
      const { url, prefix } = await migratedGuard(target);
      const names = Array.from({ length: 24 }, (_, index) => `race-${index}`);
      const outcome = await slotRace(url, prefix, names, { processes: 4, rounds: 5 });
      expect(outcome).toMatchObject({ duplicates: 0, unrun: 0, errorSkips: 0, logged: [] });
      expect(outcome.executions).toBe(names.length * 5);
    });
  });
});

const postgres = dialectTargets().find((target) => target.name === 'postgres');

describe.skipIf(postgres?.serverUrl === null || postgres === undefined)('a batch with a failing job on postgres', () => {
  it("runs the other jobs of the tick when one job's part of the batch fails", async () => {
    const { guard, url, prefix, logger } = await migratedGuard(postgres as NonNullable<typeof postgres>);
    const raw = await openRaw('postgres', url);
    try {
      // The database refuses the run row of one job: the batch's take fails as a whole, rolled back.
      await raw.exec(`CREATE FUNCTION ${prefix}refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
        CREATE TRIGGER ${prefix}refuse BEFORE INSERT ON ${prefix}runs
          FOR EACH ROW WHEN (NEW.job_name = 'bad') EXECUTE FUNCTION ${prefix}refuse();`);
      const names = ['good-0', 'bad', 'good-1', 'good-2'];
      const results = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
      expect(results.filter((_, index) => index !== 1)).toEqual([
        { executed: true, value: 'good-0' },
        { executed: true, value: 'good-1' },
        { executed: true, value: 'good-2' },
      ]);
      expect(results[1]).toMatchObject({ executed: false, reason: 'error' });
      expect(results[1]?.executed === false && results[1].reason === 'error' ? results[1].error.code : undefined).toBe('ACQUIRE_FAILED');
      expect(logger.errors.join('\n')).toContain('refused by the test');
      // Nothing of the failed job's attempt stayed behind: its lock is free for the next one.
      await raw.exec(`DROP TRIGGER ${prefix}refuse ON ${prefix}runs`);
      expect(await guard.run({ name: 'bad', lockAtMostFor: '1m' }, () => 'now')).toEqual({ executed: true, value: 'now' });
    } finally {
      await raw.close();
    }
  });
  it('sends the acquires of later turns, while an earlier acquire is unanswered, as one batch per turn (a tick spread over several turns)', async () => {
    const { guard: releaser, url, prefix } = await migratedGuard(postgres as NonNullable<typeof postgres>);
    const names = ['a', 'b', 'c', 'd', 'e'];
    // The rows exist and are free, released by another guard: the counted guard probes each.
    for (const name of names) expect((await releaser.run({ name, lockAtMostFor: '1m' }, () => name)).executed).toBe(true);
    const raw = await openRaw('postgres', url);
    const admin = await openRaw('postgres', url);
    const counted = countingPostgresPool(url);
    const guard = createGuard({ database: counted.pool, tablePrefix: prefix, logger: { warn: () => undefined, error: () => undefined } });
    try {
      await guard.migrate();
      // Another session writes row a and has not committed: the acquire of a waits in its take.
      await raw.exec('BEGIN');
      await raw.query(`SELECT * FROM ${prefix}locks WHERE name = 'a' FOR UPDATE`);
      const before = counted.count();
      const runs = [guard.run({ name: 'a', lockAtMostFor: '1m' }, () => 'a')];
      await untilStatementWaits(admin, 'postgres', `WITH taken AS%${prefix}locks%`);
      // Two later turns of the event loop, two jobs each, while a is still unanswered.
      for (const turn of [
        ['b', 'c'],
        ['d', 'e'],
      ]) {
        await new Promise((resolve) => setImmediate(resolve));
        runs.push(...turn.map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
      }
      await raw.exec('COMMIT');
      expect(await Promise.all(runs)).toEqual(['a', 'b', 'c', 'd', 'e'].map((value) => ({ executed: true, value })));
      // a: its probe and its take, alone; then each later turn: one probe and one take for its
      // two jobs (the first of a turn waits for the end of it, as something sent before it is
      // unanswered), where the first of each turn used to go alone: 5 probes and 5 takes.
      const sent = counted.texts.slice(before);
      const kinds = (pattern: RegExp) => sent.filter((text) => pattern.test(text.trimStart())).length;
      expect([kinds(/^SELECT CASE WHEN paused_at/), kinds(/^WITH taken AS/)], 'one-job probes and takes').toEqual([1, 1]);
      expect(
        [kinds(/^SELECT r\.i::int/), kinds(/^WITH req AS \(\s+SELECT \* FROM unnest\([^)]*::timestamptz\[\]/)],
        'batch probes and takes',
      ).toEqual([2, 2]);
    } finally {
      await guard.close();
      await counted.pool.end();
      await raw.close();
      await admin.close();
    }
  });

  it('waits, as a one-job take does, for a free row another session is writing, and takes it once that session is done', async () => {
    const { guard, url, prefix } = await migratedGuard(postgres as NonNullable<typeof postgres>);
    const raw = await openRaw('postgres', url);
    const admin = await openRaw('postgres', url);
    try {
      // The rows exist and are free (released by their runs).
      for (const name of ['first', 'a', 'b']) expect((await guard.run({ name, lockAtMostFor: '1m' }, () => name)).executed).toBe(true);
      // Another session writes row a (a late release, an operator's control) and has not committed.
      await raw.exec('BEGIN');
      await raw.query(`SELECT * FROM ${prefix}locks WHERE name = 'a' FOR UPDATE`);
      // A second guard (it has not released these locks itself): the first acquire of the turn goes
      // at once, alone; a and b go through the batch's probe and take.
      const other = guardOn(url, prefix).guard;
      const both = Promise.all(['first', 'a', 'b'].map((name) => other.run({ name, lockAtMostFor: '1m' }, () => name)));
      await untilStatementWaits(admin, 'postgres', `WITH req AS%unnest%${prefix}locks%`);
      await raw.exec('COMMIT');
      expect(await both).toEqual([
        { executed: true, value: 'first' },
        { executed: true, value: 'a' },
        { executed: true, value: 'b' },
      ]);
    } finally {
      await raw.close();
      await admin.close();
    }
  });
});

const sqlite = dialectTargets().find((target) => target.name === 'sqlite');

/** A later turn of the event loop. */
const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 20));

/** The statements of the lock and run tables, without the replica's own presence row (written in the background). */
const lockStatements = (texts: readonly string[]) => texts.filter((text) => !/_replicas"/.test(text));

describe.skipIf(sqlite === undefined)('batched acquires on sqlite', () => {
  const target = sqlite as NonNullable<typeof sqlite>;

  it('sends the acquires of one tick as one batch, a bounded number of statements whatever the number of jobs', async () => {
    const database = new Database(sqlitePath(databaseUrl(target)));
    const guard = createGuard({ database, tablePrefix: uniquePrefix() });
    const recorder = recordStatements(database);
    try {
      await guard.migrate();
      await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => undefined);
      const sent = new Map<number, { won: string[]; lost: string[] }>();
      for (const count of [3, 10, 40]) {
        const names = Array.from({ length: count }, (_, index) => `job-${count}-${index}`);
        // A tick of new jobs: all won (then released, in one batch too). Each tick starts a turn of
        // the event loop of its own (better-sqlite3 answers within the turn it was asked in).
        await nextTurn();
        recorder.take();
        const won = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot: SLOT_2 }, () => name)));
        expect(won.every((result) => result.executed)).toBe(true);
        const wonStatements = lockStatements(recorder.take());
        // A tick of the same jobs for an older slot: this guard released them itself, so each goes
        // straight to the take, loses it, and is told why in the same transaction.
        await nextTurn();
        recorder.take();
        const lost = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot: SLOT_1 }, () => name)));
        expect(lost.every((result) => !result.executed && result.reason === 'slot-done')).toBe(true);
        sent.set(count, { won: wonStatements, lost: lockStatements(recorder.take()) });
      }
      // The first acquire (and release) of a turn goes at once, alone (core/tick-batch.ts), the
      // others together; a busy event loop may also put all of them in the batch. Either way one
      // batch for the tick, whatever N. Won: the probe, BEGIN, the take, the run rows, COMMIT (up
      // to twice), then the releases: BEGIN, the lock rows, the run rows, COMMIT (up to twice).
      // Lost: BEGIN, the take (which writes nothing), why it lost, COMMIT (up to twice).
      for (const [count, { won, lost }] of sent) {
        expect(
          won.filter((text) => text.includes('json_each')),
          `${count} won`,
        ).toHaveLength(5);
        expect(won.length, `${count} won`).toBeLessThanOrEqual(18);
        expect(
          lost.filter((text) => text.includes('json_each')),
          `${count} lost`,
        ).toHaveLength(2);
        expect(lost.length, `${count} lost`).toBeLessThanOrEqual(8);
      }
    } finally {
      recorder.stop();
      await guard.close();
      database.close();
    }
  });

  it('lets a loop of runs of one job go on without waiting for the end of the turn (its statements answer within the turn)', async () => {
    const { guard } = await migratedGuard(target);
    await guard.run({ name: 'looped', lockAtMostFor: '1m' }, () => undefined);
    await nextTurn();
    // The check phase of this turn: a loop whose acquires or releases waited for the end of the
    // turn would see it pass before its last run.
    let turnEnded = false;
    setImmediate(() => (turnEnded = true));
    const ranBeforeTheTurnEnded: boolean[] = [];
    for (let run = 0; run < 20; run += 1) {
      const result = await guard.run({ name: 'looped', lockAtMostFor: '1m' }, () => !turnEnded);
      ranBeforeTheTurnEnded.push(result.executed && result.value);
    }
    expect(ranBeforeTheTurnEnded).toEqual(new Array<boolean>(20).fill(true));
  });

  it("runs the other jobs of the tick when one job's part of the batch fails", async () => {
    const { guard, url, prefix, logger } = await migratedGuard(target);
    const raw = await openRaw('sqlite', url);
    try {
      // The database refuses the run row of one job: the batch's transaction fails as a whole, rolled back.
      await raw.exec(`CREATE TRIGGER ${prefix}refuse BEFORE INSERT ON ${prefix}runs
        WHEN NEW.job_name = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
      const names = ['good-0', 'bad', 'good-1', 'good-2'];
      const results = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
      expect(results.filter((_, index) => index !== 1)).toEqual([
        { executed: true, value: 'good-0' },
        { executed: true, value: 'good-1' },
        { executed: true, value: 'good-2' },
      ]);
      expect(results[1]).toMatchObject({ executed: false, reason: 'error' });
      expect(results[1]?.executed === false && results[1].reason === 'error' ? results[1].error.code : undefined).toBe('ACQUIRE_FAILED');
      expect(logger.errors.join('\n')).toContain('refused by the test');
      // Nothing of the failed job's attempt stayed behind: its lock is free for the next one.
      await raw.exec(`DROP TRIGGER ${prefix}refuse`);
      expect(await guard.run({ name: 'bad', lockAtMostFor: '1m' }, () => 'now')).toEqual({ executed: true, value: 'now' });
    } finally {
      await raw.close();
    }
  });
});
