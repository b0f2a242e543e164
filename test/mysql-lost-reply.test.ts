// MySQL has no RETURNING, so a run starts with a second statement after the take. When its reply
// is lost (the INSERT committed, the connection dropped before the answer), the run row must still
// end in a final status, and the lock must not stay held. Likewise a batch whose take loses its
// connection takes nothing. A real server behind a TCP proxy that drops that one reply.
import { createPool } from 'mysql2';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, recordingLogger } from './support/guards.js';
import { startReplyDropper, type ReplyDropper } from './support/mysql-reply-dropper.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';
import { findMariadbd, startMariadb } from './setup/databases.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
/** The take procedure's name for a table prefix (src/dialects/mysql/schema.ts). */
const takeProcedureOf = (prefix: string): string => takeProcedureName(resolveTableNames(prefix, mysqlDialect));

const mysqlTarget = dialectTargets().find((target) => target.name === 'mysql');

describe.skipIf(mysqlTarget?.serverUrl === null || mysqlTarget === undefined)(
  'MySQL: a lost reply to the statement that starts a run',
  () => {
    it('marks the run abandoned and frees the lock, so that no row stays running and the next run goes ahead', async () => {
      const dropper = await startReplyDropper(mysqlTarget?.serverUrl ?? '');
      try {
        const prefix = uniquePrefix();
        const { guard, logger } = guardOn(dropper.url, prefix);
        await guard.migrate();
        // Once on a connection that is gone, then as usual.
        expect(await guard.run({ name: 'before', lockAtMostFor: '1m' }, () => 0)).toEqual({ executed: true, value: 0 });
        dropper.arm((sql) => sql.startsWith(`INSERT INTO \`${prefix}runs\``) && sql.includes("'running'"));
        let ran = false;
        const lost = await guard.run({ name: 'lost-reply', lockAtMostFor: '1m' }, () => {
          ran = true;
        });
        expect(dropper.dropped).toBe(1);
        expect(ran).toBe(false);
        expect(lost).toMatchObject({ executed: false, reason: 'error' });
        // The row the lost INSERT wrote is final, and nothing is left running.
        const { runs } = await guard.history({ job: 'lost-reply' });
        expect(runs.map((run) => run.status)).toEqual(['abandoned']);
        expect((await guard.history({ status: 'running' })).runs).toEqual([]);
        expect((await guard.doctor()).flatMap((job) => job.problems).filter((problem) => problem.includes("still 'running'"))).toEqual([]);
        // The lock was given back: the next run does not wait for lockAtMostFor.
        expect(await guard.run({ name: 'lost-reply', lockAtMostFor: '1m' }, () => 1)).toEqual({
          executed: true,
          value: 1,
        });
        expect((await guard.history({ job: 'lost-reply' })).runs.map((run) => run.status)).toEqual(['succeeded', 'abandoned']);
        expect(logger.errors.length).toBeGreaterThan(0);
      } finally {
        await dropper.close();
      }
    });

    it("loses a batch's connection in its take: the batch takes nothing, each job then runs alone, and a pool passed in gets no 'error' event", async () => {
      const serverUrl = mysqlTarget?.serverUrl ?? '';
      const dropper = await startReplyDropper(serverUrl);
      // The app's own pool, with no 'error' listener: an 'error' event on one of its connections
      // would be an uncaught exception (the run would fail with it). The take binds more than 128
      // values, so the guard closes it after use (src/dialects/mysql/connection.ts), here on a dead connection.
      const pool = createPool({ uri: dropper.url, connectionLimit: 4 });
      const prefix = uniquePrefix();
      const guard = createGuard({ database: pool, tablePrefix: prefix, logger: recordingLogger() });
      try {
        await guard.migrate();
        // Tables without the take procedure (before migration 006): the batch takes its rows with statements.
        const raw = await openRaw('mysql', serverUrl);
        await raw.exec(`DROP PROCEDURE \`${takeProcedureOf(prefix)}\``).finally(() => raw.close());
        // 40 rows that exist and are free, released by another guard: the guard probes them, then
        // takes them in one transaction (an UPDATE binding 64 rows × 11 values), whose reply is lost.
        const names = Array.from({ length: 40 }, (_, index) => `job-${index}`);
        const { guard: other } = guardOn(serverUrl, prefix);
        await Promise.all(names.map((name) => other.run({ name, lockAtMostFor: '1m' }, () => name)));
        expect((await guard.run({ name: 'warm-up', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
        dropper.arm((sql) => sql.startsWith(`UPDATE \`${prefix}locks\``) && sql.includes('CASE name WHEN'));
        const results = await Promise.all(['first', ...names].map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => name)));
        expect(dropper.dropped).toBe(1);
        // The server rolled the transaction back with its connection: each job, sent alone, runs.
        expect(results).toEqual(['first', ...names].map((value) => ({ executed: true, value })));
        expect((await guard.history({ limit: 100 })).runs.filter((run) => run.status !== 'succeeded')).toEqual([]);
      } finally {
        await guard.close();
        await new Promise<void>((resolve) => pool.end(() => resolve()));
        await dropper.close();
      }
    });

    it('loses the answer to a CALL of the take procedure after the server ran it: the rows are read back, and each job runs once', async () => {
      const serverUrl = mysqlTarget?.serverUrl ?? '';
      const dropper = await startReplyDropper(serverUrl);
      const prefix = uniquePrefix();
      const { guard, logger } = guardOn(dropper.url, prefix);
      const slot = new Date(Date.UTC(2030, 0, 1, 0, 1));
      try {
        await guard.migrate();
        // 40 rows that exist and that this guard released itself: it takes them at once, the lone
        // first acquire of the turn in a CALL of its own, the others in one CALL together.
        const names = Array.from({ length: 40 }, (_, index) => `job-${index}`);
        expect(
          (await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m' }, () => 0)))).every((run) => run.executed),
        ).toBe(true);
        // The first CALL to reach the server runs and commits there; its answer is lost with its connection.
        dropper.arm((sql) => sql.startsWith('CALL '));
        const runs = new Map<string, number>();
        const results = await Promise.all(
          names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot }, () => void runs.set(name, (runs.get(name) ?? 0) + 1))),
        );
        expect(dropper.dropped).toBe(1);
        // What the lost call took, it started the runs of: read back, those jobs run, once each.
        expect(results.map((result) => result.executed)).toEqual(names.map(() => true));
        expect([...runs.values()]).toEqual(names.map(() => 1));
        const { runs: history } = await guard.history({ limit: 200 });
        expect(history.filter((run) => run.status !== 'succeeded')).toEqual([]);
        expect(history).toHaveLength(80);
        expect(logger.errors).toEqual([]);
      } finally {
        await guard.close();
        await dropper.close();
      }
    });

    // A MariaDB of its own: BACKUP STAGE BLOCK_COMMIT holds every commit on the server it runs on.
    it.skipIf(findMariadbd() === undefined && process.env['CI'] === undefined)(
      'loses the answer to a CALL that commits only after it: the rows are read back once the call has ended, and the job runs',
      async () => {
        const server = await startMariadb();
        try {
          const admin = await openRaw('mysql', server.url);
          try {
            // The server's side stays open: MariaDB rolls back a commit waiting for the backup lock
            // once it finds its client gone, and this call must wait at its COMMIT until released.
            const dropper = await startReplyDropper(server.url, { keepServerSide: true });
            try {
              await callCommittingAfterItsAnswer(admin, dropper);
            } finally {
              await dropper.close();
            }
          } finally {
            await admin.exec('BACKUP STAGE END').catch(() => undefined);
            await admin.close();
          }
        } finally {
          await server.stop();
        }
      },
      120_000,
    );
  },
);

/**
 * A take procedure call whose answer is lost and whose COMMIT waits (every commit held by
 * BACKUP STAGE BLOCK_COMMIT on `admin`'s connection) until the guard's read back is running.
 */
async function callCommittingAfterItsAnswer(admin: RawDatabase, dropper: ReplyDropper): Promise<void> {
  // A long bound on the guard's lock waits: the read back waits while the test holds the commit.
  const { guard, logger } = guardOn(dropper.url, uniquePrefix(), { acquireTimeout: '1m' });
  await guard.migrate();
  // Released by this guard itself: its next take of the job is a CALL of its own.
  expect((await guard.run({ name: 'job', lockAtMostFor: '1m' }, () => 0)).executed).toBe(true);
  dropper.arm((sql) => sql.startsWith('CALL '));
  // From here every commit waits: the CALL takes the row, sends the row's state (the answer the
  // proxy loses, closing the client's connection) and waits at its COMMIT, holding the row.
  await admin.exec('BACKUP STAGE START');
  await admin.exec('BACKUP STAGE BLOCK_COMMIT');
  let ran = 0;
  const result = guard.run({ name: 'job', lockAtMostFor: '1m' }, () => {
    ran += 1;
  });
  // The guard reads the row back behind the call's row lock, so its read is still running (a plain
  // read would have seen the row as it was before the call, and counted the job lost though the
  // call goes on to commit it).
  await expect
    .poll(async () => {
      const [reading] = await admin.query<{ n: number | bigint }>(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE COMMAND = 'Execute' AND INFO LIKE '%LOCK IN SHARE MODE%'`,
      );
      return Number(reading?.n ?? 0);
    })
    .toBe(1);
  expect(dropper.dropped).toBe(1);
  await admin.exec('BACKUP STAGE END');
  expect(await result).toEqual({ executed: true, value: undefined });
  expect(ran).toBe(1);
  expect((await guard.history({ job: 'job' })).runs.map((run) => run.status)).toEqual(['succeeded', 'succeeded']);
  expect(logger.errors).toEqual([]);
}
