// MySQL/MariaDB's take procedure (migration 006, issue 19): a batch of acquires whose lock rows
// exist takes its locks and starts its runs in one CALL, whose text is the same for any number of
// jobs; the names travel in one JSON value and stay byte-exact; on tables without the procedure
// the batch takes its locks with its statements, as before, and stops trying the CALL.
import { Kysely, MysqlDialect, type CompiledQuery } from 'kysely';
import { createPool } from 'mysql2';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { recordingLogger } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { openRaw } from './support/raw-database.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
/** The take procedure's name for a table prefix (src/dialects/mysql/schema.ts). */
const takeProcedureOf = (prefix: string): string => takeProcedureName(resolveTableNames(prefix, mysqlDialect));

const mysql = dialectTargets().find((target) => target.name === 'mysql');
const SLOT_1 = new Date(Date.UTC(2030, 0, 1, 0, 1));
const SLOT_2 = new Date(Date.UTC(2030, 0, 1, 0, 2));
const SLOT_3 = new Date(Date.UTC(2030, 0, 1, 0, 3));

/** Names a JSON value or a collation could mix up: case, trailing space, quotes, backslashes, JSON syntax, four-byte characters. */
const NAMES = [
  'job',
  'Job',
  'job ',
  `quote ' "double" \\ back`,
  'json "}]\\u0041 {"n": "job"}',
  'emoji 🦀 ✓ 漢字',
  'é'.repeat(255),
  '🦀'.repeat(255),
];

describe.skipIf(mysql?.serverUrl === null || mysql === undefined)('the take procedure on mysql', () => {
  const target = mysql as NonNullable<typeof mysql>;

  /** A guard through a Kysely passed in that logs every statement (failed ones too); closed by `end`. */
  const loggedGuard = (prefix: string, log: CompiledQuery[], history = true) => {
    const kysely = loggedKysely(target, databaseUrl(target), log, { failed: true });
    const logger = recordingLogger();
    const guard: Guard = createGuard({ database: kysely, tablePrefix: prefix, logger, history });
    return { guard, logger, end: async () => (await guard.close(), await kysely.destroy()) };
  };
  /** One tick: every name at once, at `slot`; what each run answered. */
  const tick = async (guard: Guard, names: readonly string[], slot: Date): Promise<string[]> => {
    const results = await Promise.all(names.map((name) => guard.run({ name, lockAtMostFor: '1m', slot }, () => name)));
    return results.map((result) => (result.executed ? 'ran' : result.reason));
  };
  const calls = (log: readonly CompiledQuery[]): CompiledQuery[] => log.filter(({ sql }) => sql.startsWith('CALL '));
  /** The job names of every CALL in `log`, one entry per name per CALL (a Kysely passed in gets its strings as bytes). */
  const calledNames = (log: readonly CompiledQuery[]): string[] =>
    calls(log).flatMap(({ parameters }) => {
      const [requests] = parameters;
      const json = requests instanceof Uint8Array ? Buffer.from(requests).toString() : String(requests);
      return (JSON.parse(json) as { n: string }[]).map(({ n }) => n);
    });

  it('takes the locks of a tick whose rows exist by CALLs alone, with the same text for 4 jobs as for 40', async () => {
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    const { guard, logger, end } = loggedGuard(prefix, log);
    try {
      await guard.migrate();
      const texts = new Set<string>();
      for (const size of [4, 40]) {
        const names = Array.from({ length: size }, (_, index) => `n${size}-${index}`);
        // The first tick creates the rows (the batch transaction); the guard then released them itself.
        expect(await tick(guard, names, SLOT_1)).toEqual(names.map(() => 'ran'));
        log.splice(0);
        expect(await tick(guard, names, SLOT_2)).toEqual(names.map(() => 'ran'));
        // Each acquire went in exactly one CALL: the lone first of the turn (core/tick-batch.ts),
        // the others together (one batch per turn they came in; the guard released these locks
        // itself, so each takes at once), and no batch statement took any.
        const sent = log.splice(0);
        expect(calledNames(sent).sort()).toEqual([...names].sort());
        expect(calls(sent).length).toBeLessThanOrEqual(3);
        expect(sent.filter(({ sql }) => sql.includes('CASE name WHEN'))).toEqual([]);
        for (const { sql } of calls(sent)) texts.add(sql);
        // The slot is done. The guard released these locks itself, so it takes first: the CALLs
        // take nothing and answer why each lost (the row's slot), with no probe after them.
        expect(await tick(guard, names, SLOT_2)).toEqual(names.map(() => 'slot-done'));
        const lost = log.splice(0);
        expect(calledNames(lost).sort()).toEqual([...names].sort());
        expect(lost.filter(({ sql }) => sql.includes('AS state'))).toEqual([]);
      }
      expect(texts.size).toBe(1);
      expect(logger.errors).toEqual([]);
    } finally {
      await end();
    }
  });

  it.each([
    { kind: 'its own pool (bound values)', throughKysely: false },
    { kind: 'a Kysely passed in (strings as bytes)', throughKysely: true },
  ])('keeps names byte-exact in the JSON value of one call, through $kind', async ({ throughKysely }) => {
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    const url = databaseUrl(target);
    const logged = loggedGuard(prefix, log);
    const guard = throughKysely ? logged.guard : createGuard({ database: url, tablePrefix: prefix, logger: recordingLogger() });
    const raw = await openRaw('mysql', url);
    try {
      await guard.migrate();
      // The rows exist and are free (each created alone), then every name at once at two slots.
      for (const name of NAMES) expect((await guard.run({ name, lockAtMostFor: '1m' }, () => name)).executed).toBe(true);
      expect(await tick(guard, NAMES, SLOT_1)).toEqual(NAMES.map(() => 'ran'));
      expect(await tick(guard, NAMES, SLOT_2)).toEqual(NAMES.map(() => 'ran'));
      // Both ticks: every name in one CALL each (the guard released these locks itself).
      if (throughKysely) expect(calledNames(log).sort()).toEqual([...NAMES, ...NAMES].sort());
      // One row per name, each with its own slot watermark; three runs each in history.
      const rows = await raw.query<{ name: string; last_slot: unknown }>(
        `SELECT CONVERT(name USING utf8mb4) AS name, last_slot FROM ${prefix}locks`,
      );
      expect(rows.map((row) => row.name).sort()).toEqual([...NAMES].sort());
      expect(new Set(rows.map((row) => String(row.last_slot))).size).toBe(1);
      for (const name of NAMES) {
        const { runs } = await guard.history({ job: name });
        expect(
          runs.map((run) => run.status),
          JSON.stringify(name),
        ).toEqual(['succeeded', 'succeeded', 'succeeded']);
      }
    } finally {
      await raw.close();
      await logged.end();
      if (!throughKysely) await guard.close();
    }
  });

  it('writes no run rows for a guard without history', async () => {
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    const { guard, end } = loggedGuard(prefix, log, false);
    const raw = await openRaw('mysql', databaseUrl(target));
    try {
      await guard.migrate();
      const names = ['a', 'b', 'c'];
      expect(await tick(guard, names, SLOT_1)).toEqual(['ran', 'ran', 'ran']);
      log.splice(0);
      expect(await tick(guard, names, SLOT_2)).toEqual(['ran', 'ran', 'ran']);
      // The batch's take is a call; the lone first acquire's is the one-job UPDATE (without history it
      // is one statement already).
      expect(calledNames(log).sort()).toEqual(['b', 'c']);
      expect(await raw.query(`SELECT id FROM ${prefix}runs`)).toEqual([]);
    } finally {
      await raw.close();
      await end();
    }
  });

  it('reads the rows back when a CALL answers in a shape it does not read, and runs each job it took', async () => {
    // A Kysely passed in whose dialect answers a CALL with no rows (here a plugin drops them: a
    // CALL is the only statement mysql2 answers with an array of result sets). The CALL still
    // took the locks and wrote the run rows: counted lost, every job would go unrun on every replica.
    const prefix = uniquePrefix();
    const kysely = new Kysely<unknown>({
      dialect: new MysqlDialect({ pool: createPool({ uri: databaseUrl(target), connectionLimit: 2 }) }),
      plugins: [
        {
          transformQuery: ({ node }) => node,
          transformResult: ({ result }) => Promise.resolve(Array.isArray(result.rows[0]) ? { ...result, rows: [] } : result),
        },
      ],
    });
    const guard = createGuard({ database: kysely, tablePrefix: prefix, logger: recordingLogger() });
    const raw = await openRaw('mysql', databaseUrl(target));
    try {
      await guard.migrate();
      const names = ['a', 'b', 'c', 'd'];
      expect(await tick(guard, names, SLOT_1)).toEqual(names.map(() => 'ran'));
      expect(await tick(guard, names, SLOT_2)).toEqual(names.map(() => 'ran'));
      // Each job ran each slot once, its run row finished (the release found it).
      const runs = await raw.query<{ job_name: unknown; status: string }>(
        `SELECT job_name, status FROM ${prefix}runs ORDER BY job_name, started_at`,
      );
      expect(runs.map(({ job_name, status }) => [String(job_name), status])).toEqual(
        names.flatMap((name) => [
          [name, 'succeeded'],
          [name, 'succeeded'],
        ]),
      );
    } finally {
      await raw.close();
      await guard.close();
      await kysely.destroy();
    }
  });

  it('takes the locks with its statements on tables without the procedure, and stops calling it', async () => {
    const prefix = uniquePrefix();
    const log: CompiledQuery[] = [];
    const { guard, logger, end } = loggedGuard(prefix, log);
    const raw = await openRaw('mysql', databaseUrl(target));
    try {
      await guard.migrate();
      // Tables as a replica of this version finds them before migration 006.
      await raw.exec(`DROP PROCEDURE \`${takeProcedureOf(prefix)}\``);
      const names = ['a', 'b', 'c'];
      expect(await tick(guard, names, SLOT_1)).toEqual(['ran', 'ran', 'ran']);
      log.splice(0);
      // The CALLs are refused (no such procedure, nothing run): the lone first acquire's, and the
      // batch's when it left before that answer came back. The statements take the locks.
      expect(await tick(guard, names, SLOT_2)).toEqual(['ran', 'ran', 'ran']);
      expect(calls(log).length).toBeGreaterThanOrEqual(1);
      expect(calls(log).length).toBeLessThanOrEqual(2);
      expect(log.filter(({ sql }) => sql.includes('CASE name WHEN'))).toHaveLength(1);
      log.splice(0);
      // Not tried again for a while: the next tick goes straight to the statements.
      expect(await tick(guard, names, SLOT_3)).toEqual(['ran', 'ran', 'ran']);
      expect(calls(log)).toEqual([]);
      expect(log.filter(({ sql }) => sql.includes('CASE name WHEN'))).toHaveLength(1);
      expect(logger.errors).toEqual([]);
    } finally {
      await raw.close();
      await end();
    }
  });

  it('migrates without the procedure for a user who may not create routines, and a later migrate() by one who may creates it', async () => {
    const prefix = uniquePrefix();
    const url = databaseUrl(target);
    const user = `${prefix}user`;
    const raw = await openRaw('mysql', url);
    try {
      // A user with every privilege on the tables but CREATE ROUTINE (and ALTER ROUTINE, EXECUTE).
      await raw.exec(`CREATE USER '${user}'@'%' IDENTIFIED BY 'secret'`);
      await raw.exec(`GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP ON *.* TO '${user}'@'%'`);
      const limitedUrl = new URL(url);
      limitedUrl.username = user;
      limitedUrl.password = 'secret';
      const limited = createGuard({ database: limitedUrl.toString(), tablePrefix: prefix, logger: recordingLogger() });
      const procedures = async (): Promise<unknown[]> =>
        raw.query(`SELECT 1 FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?`, [
          takeProcedureOf(prefix),
        ]);
      try {
        const versions = await limited.migrate();
        expect(versions.database).toBe(versions.code);
        expect(await procedures()).toEqual([]);
        // Said: every migration applied, the procedure left out.
        expect(versions.applied).toContain('006_take_procedure');
        expect(versions.skippedRoutines).toEqual([takeProcedureOf(prefix)]);
        // Its batches take their locks with their statements.
        expect(await tick(limited, ['a', 'b', 'c'], SLOT_1)).toEqual(['ran', 'ran', 'ran']);
        expect(await tick(limited, ['a', 'b', 'c'], SLOT_2)).toEqual(['ran', 'ran', 'ran']);
      } finally {
        await limited.close();
      }
      const log: CompiledQuery[] = [];
      const { guard, end } = loggedGuard(prefix, log);
      try {
        expect(await guard.migrate()).toMatchObject({ applied: [], skippedRoutines: [] });
        expect(await procedures()).toHaveLength(1);
        expect(await tick(guard, ['a', 'b', 'c'], SLOT_3)).toEqual(['ran', 'ran', 'ran']);
        log.splice(0);
        // This guard released the locks itself: the lone first acquire and the batch, a CALL each.
        expect(await tick(guard, ['a', 'b', 'c'], new Date(SLOT_3.getTime() + 60_000))).toEqual(['ran', 'ran', 'ran']);
        expect(calledNames(log).sort()).toEqual(['a', 'b', 'c']);
      } finally {
        await end();
      }
    } finally {
      await raw.exec(`DROP USER IF EXISTS '${user}'@'%'`);
      await raw.close();
    }
  });
});
