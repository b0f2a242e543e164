// MySQL/MariaDB's acquireMany and releaseMany (issue 19): the acquires and releases a replica starts
// in one turn of the event loop cost a number of statements that does not grow with the number of
// jobs; one job's refused part (its run row, its release) fails that job alone (the batch is one
// transaction, rolled back); the batch's take waits, as a one-job take does, for a free row another
// session is writing, and shutdown can cut it there.
import type { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard, type GuardOptions } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard, recordingLogger } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { expectFailingReleaseAlone } from './support/ending-together.js';
import { openRaw } from './support/raw-database.js';
import { untilStatementWaits } from './support/statement-waits.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
/** The take procedure's name for a table prefix (src/dialects/mysql/schema.ts). */
const takeProcedureOf = (prefix: string): string => takeProcedureName(resolveTableNames(prefix, mysqlDialect));

const mysql = dialectTargets().find((target) => target.name === 'mysql');
const SLOT_1 = new Date(Date.UTC(2030, 0, 1, 0, 1));
const SLOT_2 = new Date(Date.UTC(2030, 0, 1, 0, 2));

/**
 * A batch's take: one call of the take procedure (migration 006), or, on tables without it, the
 * transaction of batch statements. `takeWaiting`: what the processlist shows of each one's UPDATE
 * while it waits for row a (inside the procedure, its variables as NAME_CONST).
 */
const TAKE_PATHS = [
  { path: 'one call of the take procedure', withProcedure: true, takeWaiting: "NAME_CONST('v_name'" },
  { path: 'batch statements, without the procedure', withProcedure: false, takeWaiting: 'CASE name WHEN' },
];

/** Tables as a replica of this version finds them before migration 006: no take procedure. */
async function dropTakeProcedure(url: string, prefix: string): Promise<void> {
  const raw = await openRaw('mysql', url);
  try {
    await raw.exec(`DROP PROCEDURE \`${takeProcedureOf(prefix)}\``);
  } finally {
    await raw.close();
  }
}

describe.skipIf(mysql?.serverUrl === null || mysql === undefined)('batches on mysql', () => {
  const target = mysql as NonNullable<typeof mysql>;

  it('sends the acquires and releases of one tick in as many statements for 12 jobs as for 4', async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    // The guard's statements, through a Kysely instance passed in (strings go as bytes there).
    const kysely = loggedKysely(target, url, log);
    const logger = recordingLogger();
    const guard: Guard = createGuard({ database: kysely, tablePrefix: prefix, logger });
    const other = guardOn(url, prefix).guard;
    try {
      await guard.migrate();
      // The guard's first run also checks the schema and registers the replica: not part of a tick.
      expect((await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
      /**
       * The statements `guard` sends for one tick of `names`, and what each job's run answered.
       * The bodies that run wait for each other and end together: their releases go in one turn.
       */
      const tick = async (on: Guard, names: readonly string[], slot: Date, lockAtLeastFor: string | 0 = 0) => {
        log.splice(0);
        let open!: () => void;
        const gate = new Promise<void>((resolve) => (open = resolve));
        let started = 0;
        const body = async (name: string): Promise<string> => {
          started += 1;
          if (started === names.length) open();
          await gate;
          return name;
        };
        const results = await Promise.all(
          names.map((name) => on.run({ name, lockAtMostFor: '1m', lockAtLeastFor, slot }, () => body(name))),
        );
        // The tick's own statements: on the lock, run and control rows, the take procedure, and
        // their transactions. The guard's background statements (its replica row, a schema version
        // read, a declaration) are not the tick's, and a stalled machine lets more of them fall into it.
        const own = new RegExp(`^(begin|commit|rollback)$|^CALL |\`${prefix}(locks|runs|controls)\``);
        const sent = log.splice(0).filter((query) => own.test(query.sql.trim()));
        statementsOf.set(
          `${names.length}@${slot.toISOString()}@${on === guard ? 'guard' : 'other'}`,
          sent.map((query) => query.sql.replace(/\s+/g, ' ').slice(0, 80)),
        );
        return { outcomes: results.map((result) => (result.executed ? 'ran' : result.reason)), statements: sent.length };
      };
      const counts = new Map<number, number[]>();
      /** Each tick's statements, printed when a count is off. */
      const statementsOf = new Map<string, string[]>();
      for (const size of [4, 12]) {
        const names = Array.from({ length: size }, (_, index) => `n${size}-${index}`);
        const ran = names.map(() => 'ran');
        // First acquire ever (no rows yet: probe, then create), then release.
        const created = await tick(guard, names, SLOT_1);
        // The guard released these locks itself: the take goes first, then release.
        const taken = await tick(guard, names, SLOT_2);
        // Slot done everywhere: the probe alone answers every job.
        const done = await tick(guard, names, SLOT_2);
        expect([created.outcomes, taken.outcomes, done.outcomes]).toEqual([ran, ran, names.map(() => 'slot-done')]);
        // Another replica holds every lock now (lockAtLeastFor): the probe alone answers again.
        await tick(other, names, new Date(SLOT_2.getTime() + 60_000), '1m');
        const held = await tick(guard, names, new Date(SLOT_2.getTime() + 120_000));
        expect(held.outcomes).toEqual(names.map(() => 'locked'));
        counts.set(size, [created.statements, taken.statements, done.statements, held.statements]);
      }
      // As many for 12 jobs as for 4 (one job alone costs 2 to 4 statements a tick: 12 would be 24
      // to 48), give or take the guard's own background statements falling into the tick (its
      // replica row) and where the first job's release falls among the turns.
      const [small, large] = [counts.get(4) ?? [], counts.get(12) ?? []];
      expect(large).toHaveLength(small.length);
      large.forEach((count, round) =>
        expect(
          count,
          `round ${round}: ${large.join()} against ${small.join()}: ${JSON.stringify(Object.fromEntries(statementsOf))}`,
        ).toBeLessThanOrEqual((small[round] ?? 0) + 2),
      );
      // The first acquire (and release) of a turn goes alone at once (core/tick-batch.ts), the
      // others together: a win of the whole tick is the probe (or not), the transaction of the
      // take, and the one of the releases, beside the first job's own statements.
      for (const count of counts.get(4) ?? []) expect(count, JSON.stringify(Object.fromEntries(statementsOf))).toBeLessThanOrEqual(16);
      expect(logger.warnings).toEqual([]);
      expect(logger.errors).toEqual([]);
    } finally {
      await guard.close();
      await kysely.destroy();
    }
  });

  it.each([
    { rows: 'new names, created in the batch transaction', existing: false },
    { rows: 'existing rows, taken by one call of the take procedure', existing: true },
  ])("runs the other jobs of a scheduled tick when one job's run row is refused ($rows)", async ({ existing }) => {
    const { guard, url, prefix, logger } = await migratedGuard(target);
    const raw = await openRaw('mysql', url);
    const names = ['good-0', 'bad', 'good-1', 'good-2'];
    const slot = existing ? SLOT_2 : SLOT_1;
    try {
      if (existing) {
        const first = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot: SLOT_1 }, () => name)));
        expect(first.map((result) => result.executed)).toEqual([true, true, true, true]);
      }
      // The database refuses the run row of one job: the batch's transaction (or the procedure's)
      // fails as a whole, rolled back, slot watermarks included, and each job then goes alone.
      await raw.exec(`CREATE TRIGGER ${prefix}refuse BEFORE INSERT ON ${prefix}runs FOR EACH ROW
        BEGIN IF NEW.job_name = 'bad' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF; END`);
      const results = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot }, () => name)));
      expect(results.filter((_, index) => index !== 1)).toEqual([
        { executed: true, value: 'good-0' },
        { executed: true, value: 'good-1' },
        { executed: true, value: 'good-2' },
      ]);
      expect(results[1]).toMatchObject({ executed: false, reason: 'error' });
      expect(results[1]?.executed === false && results[1].reason === 'error' ? results[1].error.code : undefined).toBe('ACQUIRE_FAILED');
      expect(logger.errors.join('\n')).toContain('refused by the test');
      // Nothing of the failed job's attempt holds its lock: the next slot runs.
      await raw.exec(`DROP TRIGGER ${prefix}refuse`);
      const next = new Date(slot.getTime() + 60_000);
      expect(await guard.run({ name: 'bad', lockAtMostFor: '1m', slot: next }, () => 'now')).toEqual({ executed: true, value: 'now' });
    } finally {
      await raw.close();
    }
  });

  it("releases the other jobs of the turn when one job's part of the batched release fails", async () => {
    const { guard, url, prefix, logger } = await migratedGuard(target);
    const other = guardOn(url, prefix).guard;
    const raw = await openRaw('mysql', url);
    try {
      // The database refuses to finish the run of one job: the batch's transaction fails as a
      // whole, rolled back (the locks it had read FOR UPDATE and released included).
      await raw.exec(`CREATE TRIGGER ${prefix}refuse BEFORE UPDATE ON ${prefix}runs FOR EACH ROW
        BEGIN IF NEW.job_name = 'bad' AND NEW.finished_at IS NOT NULL THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF; END`);
      await expectFailingReleaseAlone(guard, other, logger);
    } finally {
      await raw.close();
    }
  });

  it('makes a name another replica is creating at that instant a loss, and still creates the other new names of the batch', async () => {
    const { guard, url, prefix, logger } = await migratedGuard(target);
    const raw = await openRaw('mysql', url);
    const admin = await openRaw('mysql', url);
    try {
      expect((await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
      // Another replica creates the row of 'contested' and has not committed: the probe does not see it.
      await raw.exec('START TRANSACTION');
      await raw.query(
        `INSERT INTO ${prefix}locks (name, lock_until, locked_at, locked_by, token)
         VALUES ('contested', UTC_TIMESTAMP(3) + INTERVAL 1 MINUTE, UTC_TIMESTAMP(3), 'other replica', '00000000-0000-4000-8000-000000000000')`,
      );
      // The first acquire of the turn goes alone; 'contested' and 'fresh' go together, and their INSERT waits for that row.
      const all = Promise.all(['first', 'contested', 'fresh'].map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
      await untilStatementWaits(admin, 'mysql', `INSERT INTO \`${prefix}locks\`%VALUES (%),%(%`);
      await raw.exec('COMMIT');
      // The duplicate key fails that one statement: each name then alone, 'contested' a loss.
      expect(await all).toEqual([
        { executed: true, value: 'first' },
        { executed: false, reason: 'locked' },
        { executed: true, value: 'fresh' },
      ]);
      const { runs } = await guard.history({ limit: 50 });
      expect(runs.filter((run) => run.job === 'fresh')).toEqual([expect.objectContaining({ status: 'succeeded' })]);
      expect(runs.filter((run) => run.job === 'contested')).toEqual([]);
      expect(logger.errors).toEqual([]);
    } finally {
      await raw.close();
      await admin.close();
    }
  });

  it('finds, in one read, the new names another replica created at that instant, not by one INSERT per name', async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    const kysely = loggedKysely(target, url, log, { failed: true });
    const logger = recordingLogger();
    const guard: Guard = createGuard({ database: kysely, tablePrefix: prefix, logger });
    const raw = await openRaw('mysql', url);
    const admin = await openRaw('mysql', url);
    try {
      await guard.migrate();
      expect((await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
      // Another replica creates the rows of ten new names and has not committed (replicas racing
      // for a tick of jobs that never ran anywhere): the probe does not see them.
      const contested = Array.from({ length: 10 }, (_, index) => `contested-${index}`);
      await raw.exec('START TRANSACTION');
      for (const name of contested)
        await raw.query(
          `INSERT INTO ${prefix}locks (name, lock_until, locked_at, locked_by, token)
           VALUES (?, UTC_TIMESTAMP(3) + INTERVAL 1 MINUTE, UTC_TIMESTAMP(3), 'other replica', UUID())`,
          [name],
        );
      log.splice(0);
      // The first acquire of the turn goes alone; the others together, and their INSERT waits for those rows.
      const names = ['first', ...contested, 'fresh-0', 'fresh-1'];
      const all = Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot: SLOT_1 }, () => name)));
      await untilStatementWaits(admin, 'mysql', `INSERT INTO \`${prefix}locks\`%VALUES (%),%(%`);
      await raw.exec('COMMIT');
      expect(await all).toEqual([
        { executed: true, value: 'first' },
        ...contested.map(() => ({ executed: false, reason: 'locked' })),
        { executed: true, value: 'fresh-0' },
        { executed: true, value: 'fresh-1' },
      ]);
      // The INSERTs of lock rows: the first job's, the batch's (a duplicate key), and the two
      // names still missing together. One INSERT per name would be 1 + 1 + 12.
      // (A Kysely passed in gets its strings as bytes.)
      const text = (value: unknown): unknown => (value instanceof Uint8Array ? Buffer.from(value).toString() : value);
      const inserts = log.filter(({ sql }) => sql.startsWith(`INSERT INTO \`${prefix}locks\``));
      expect(inserts.map(({ parameters }) => parameters.map(text).filter((value) => names.includes(value as string)))).toEqual([
        ['first'],
        names.slice(1),
        ['fresh-0', 'fresh-1'],
      ]);
      expect(logger.errors).toEqual([]);
    } finally {
      await guard.close();
      await kysely.destroy();
      await raw.close();
      await admin.close();
    }
  });

  /**
   * Rows a and b exist and are free (released by a first guard's runs); `other`, a second guard
   * past its first run's schema check and replica registration, has not released them itself, so
   * its acquires of them go through the batch's probe and take; `raw` holds row `locked` in an open
   * transaction (a late release, an operator's control); `admin` watches the processlist.
   */
  const rowsWithOneWritten = async (withProcedure: boolean, locked: 'a' | 'b', options: Partial<GuardOptions> = {}) => {
    const { guard, url, prefix } = await migratedGuard(target);
    if (!withProcedure) await dropTakeProcedure(url, prefix);
    for (const name of ['a', 'b']) expect((await guard.run({ name, lockAtMostFor: '1m' }, () => name)).executed).toBe(true);
    const other = guardOn(url, prefix, options).guard;
    expect((await other.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
    const raw = await openRaw('mysql', url);
    const admin = await openRaw('mysql', url);
    closeWhenTestEnds(() => Promise.all([raw.close(), admin.close()]));
    await raw.exec('START TRANSACTION');
    await raw.query(`SELECT * FROM ${prefix}locks WHERE name = ? FOR UPDATE`, [locked]);
    return { other, prefix, raw, admin };
  };

  it.each(TAKE_PATHS)(
    'waits, as a one-job take does, for a free row another session is writing, and takes it once that session is done ($path)',
    async ({ withProcedure, takeWaiting }) => {
      const { other, prefix, raw, admin } = await rowsWithOneWritten(withProcedure, 'a');
      // The first acquire of the turn goes alone (core/tick-batch.ts): a and b go together.
      const both = Promise.all(['first', 'a', 'b'].map((name) => other.run({ name, lockAtMostFor: '1m' }, () => name)));
      // The batch's take (the procedure's UPDATE of row a, or the batch UPDATE that chooses each
      // row's values by name) is on the server, and cannot finish while row a is locked: it waits.
      // (MariaDB's innodb_trx shows such a wait late.)
      await untilStatementWaits(admin, 'mysql', `UPDATE \`${prefix}locks\`%${takeWaiting}%`);
      await raw.exec('COMMIT');
      expect(await both).toEqual([
        { executed: true, value: 'first' },
        { executed: true, value: 'a' },
        { executed: true, value: 'b' },
      ]);
    },
  );

  it.each(TAKE_PATHS)(
    "lets shutdown cut a batch's take waiting on a row lock, and the batch then takes none of its rows ($path)",
    async ({ withProcedure, takeWaiting }) => {
      // Row b, so that the take (which goes in name order) has taken row a when it waits.
      const { other, prefix, raw, admin } = await rowsWithOneWritten(withProcedure, 'b', { acquireTimeout: '10s' });
      let ran = 0;
      // The first acquire of the turn goes alone (core/tick-batch.ts) and runs: a and b go together.
      const all = Promise.all(['first', 'a', 'b'].map((name) => other.run({ name, lockAtMostFor: '1m' }, () => void (ran += 1))));
      await untilStatementWaits(admin, 'mysql', `UPDATE \`${prefix}locks\`%${takeWaiting}%`);
      await other.shutdown({ timeout: '1s' });
      const [first, ...both] = await all;
      expect(first).toEqual({ executed: true, value: undefined });
      expect(both).toEqual([
        expect.objectContaining({ executed: false, reason: 'error', error: expect.objectContaining({ code: 'GUARD_CLOSED' }) }),
        expect.objectContaining({ executed: false, reason: 'error', error: expect.objectContaining({ code: 'GUARD_CLOSED' }) }),
      ]);
      await raw.exec('COMMIT');
      // The cut take rolled back with its transaction: row a, which it had taken, is free again.
      expect(ran).toBe(1);
      const rows = await raw.query<{ name: string; token: string | null }>(
        `SELECT CONVERT(name USING utf8mb4) AS name, token FROM ${prefix}locks WHERE name IN ('a', 'b') ORDER BY name`,
      );
      expect(rows).toEqual([
        { name: 'a', token: null },
        { name: 'b', token: null },
      ]);
    },
  );

  it('sends the same statement texts for batches whose sizes round up to the same power of two, without the take procedure (each text is a prepared statement)', async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    const guard: Guard = createGuard({ database: loggedKysely(target, url, log), tablePrefix: prefix, logger: recordingLogger() });
    try {
      await guard.migrate();
      await dropTakeProcedure(url, prefix);
      expect((await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
      // The batch texts of a tick of `size` jobs whose rows exist and are free. The first job of
      // the turn goes alone; the others batch.
      const texts = async (size: number, slot: Date): Promise<Set<string>> => {
        const names = Array.from({ length: size }, (_, index) => `p-${index}`);
        log.splice(0);
        const results = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot }, () => name)));
        expect(results.map((result) => result.executed)).toEqual(names.map(() => true));
        // The acquire's batch statements (the probe's read, the take, the run rows): the releases
        // group as the bodies happen to end, so they are left out here.
        const acquireBatch = /AS state|CASE name WHEN|'abandoned'/;
        return new Set(
          log
            .splice(0)
            .map((query) => query.sql)
            .filter((text) => acquireBatch.test(text) && text.includes('?, ?')),
        );
      };
      await texts(6, SLOT_1);
      // Batches of 4 and of 3 (a tick of 5 and of 4) are built for 4 rows: the same texts.
      const five = await texts(5, SLOT_2);
      const four = await texts(4, new Date(SLOT_2.getTime() + 60_000));
      expect(five.size).toBe(2);
      expect([...four].sort()).toEqual([...five].sort());
      // A batch of 5 (a tick of 6) is built for 8 rows: other texts.
      const six = await texts(6, new Date(SLOT_2.getTime() + 120_000));
      expect([...six].some((text) => !five.has(text))).toBe(true);
    } finally {
      await guard.close();
    }
  });
});
