// migrate() while another app changes its own schema in the same database at the same instant
// (graphile-worker creating its schema beside cronguard's tables, in the bench): the other app's
// DDL must not fail cronguard's migration.
//
// PostgreSQL: Kysely's introspector, which its migrator and the migrations asked whether a table
// exists, read every schema and resolved each table and schema by name; a table the other app
// dropped or renamed during that read failed it ("relation … does not exist"). MySQL: the guard's
// reads of information_schema name its own tables (mysql-migrate-reads.test.ts); the other app here
// shares the current database, the case where a read could meet the other app's tables.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import type { DialectName } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix, type DialectTarget } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { startWorker } from './support/processes.js';
import { openRaw } from './support/raw-database.js';

/** Fresh prefixes migrated one after the other. */
const SEQUENTIAL_PREFIXES = 6;
/** Replicas' processes migrating one prefix at once. */
const REPLICAS_AT_ONCE = 4;
/** Connections changing the other app's tables at the same time, each in a tight loop. */
const CHURNERS = 3;

type MigrateMessage = { type: 'ready' } | { type: 'done'; error: string | null };

/** Where the other app's tables go: `space.name` names one (PostgreSQL: its own schema; MySQL: the shared database). */
interface OtherApp {
  readonly space: string;
  /** The table a churner works on. */
  table(churner: number): string;
}

/**
 * One round of the other app's DDL, statement by statement (each its own autocommit transaction,
 * so that every step is seen by cronguard's reads as it happens): a table with serial and identity
 * columns and a comment created, renamed, altered, dropped; on PostgreSQL, every fifth round in a
 * schema of its own, created and dropped with it.
 */
function churnRound(dialect: DialectName, app: OtherApp, churner: number, round: number): string[] {
  const table = app.table(churner);
  if (dialect === 'postgres') {
    const schemaRound = round % 5 === 0;
    const schema = schemaRound ? `${app.space}_s${churner}` : app.space;
    return [
      ...(schemaRound ? [`CREATE SCHEMA ${schema}`] : []),
      `CREATE TABLE ${schema}.${table} (id serial PRIMARY KEY, n bigint GENERATED ALWAYS AS IDENTITY, note text)`,
      `COMMENT ON COLUMN ${schema}.${table}.note IS 'the other app''s column'`,
      `ALTER TABLE ${schema}.${table} RENAME TO ${table}_renamed`,
      `ALTER TABLE ${schema}.${table}_renamed ADD COLUMN extra serial`,
      `DROP TABLE ${schema}.${table}_renamed`,
      ...(schemaRound ? [`DROP SCHEMA ${schema} CASCADE`] : []),
    ];
  }
  return [
    `CREATE TABLE ${app.space}.${table} (id bigint AUTO_INCREMENT PRIMARY KEY, note text COMMENT 'the other app''s column') ENGINE=InnoDB`,
    `RENAME TABLE ${app.space}.${table} TO ${app.space}.${table}_renamed`,
    `ALTER TABLE ${app.space}.${table}_renamed ADD COLUMN extra int`,
    `DROP TABLE ${app.space}.${table}_renamed`,
  ];
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The other app's place, removed after the test with whatever the churners left. */
async function otherApp(target: DialectTarget, url: string): Promise<OtherApp> {
  const name = `other_app_${uniquePrefix().slice(0, -1)}`;
  const raw = await openRaw(target.name, url);
  if (target.name === 'postgres') {
    await raw.exec(`CREATE SCHEMA ${name}`);
    cleanups.push(async () => {
      try {
        for (let churner = 0; churner < CHURNERS; churner += 1) await raw.exec(`DROP SCHEMA IF EXISTS ${name}_s${churner} CASCADE`);
        await raw.exec(`DROP SCHEMA ${name} CASCADE`);
      } finally {
        await raw.close();
      }
    });
    return { space: name, table: (churner) => `churn${churner}` };
  }
  const [row] = await raw.query<{ name: string }>('SELECT DATABASE() AS name');
  const app: OtherApp = { space: row?.name ?? '', table: (churner) => `${name}_churn${churner}` };
  cleanups.push(async () => {
    try {
      for (let churner = 0; churner < CHURNERS; churner += 1) {
        await raw.exec(`DROP TABLE IF EXISTS ${app.table(churner)}, ${app.table(churner)}_renamed`);
      }
    } finally {
      await raw.close();
    }
  });
  return app;
}

/**
 * Runs `work` while `CHURNERS` connections each change the other app's tables in a tight loop;
 * their own statements must never fail (that would be a broken test, and fails it).
 */
async function whileOtherAppChangesItsSchema(target: DialectTarget, url: string, work: () => Promise<void>): Promise<void> {
  const app = await otherApp(target, url);
  const connections = await Promise.all(Array.from({ length: CHURNERS }, () => openRaw(target.name, url)));
  let stopping = false;
  let rounds = 0;
  const loops = connections.map(async (raw, churner) => {
    for (let round = 0; !stopping; round += 1) {
      for (const statement of churnRound(target.name, app, churner, round)) await raw.exec(statement);
      rounds += 1;
    }
  });
  // A churner that fails stops the work at once instead of leaving it to run beside nothing.
  const churnFailed = Promise.all(loops).then(() => new Promise<never>(() => undefined));
  // Told by the `await Promise.all(loops)` below when it fails after the work ended.
  churnFailed.catch(() => undefined);
  try {
    await Promise.race([work(), churnFailed]);
  } finally {
    stopping = true;
    await Promise.allSettled(loops);
    await Promise.all(connections.map((raw) => raw.close()));
  }
  await Promise.all(loops);
  // The other app's DDL did run all along.
  expect(rounds).toBeGreaterThan(CHURNERS);
}

async function expectUsable(url: string, prefix: string): Promise<void> {
  const { guard } = guardOn(url, prefix);
  expect(await guard.run({ name: 'after-migrate', lockAtMostFor: '1m' }, () => 'ran')).toEqual({ executed: true, value: 'ran' });
}

const servers = dialectTargets().filter((target) => target.name !== 'sqlite');

/**
 * MariaDB writes each DDL statement of the other app's churn durably (several fsyncs each), and the
 * six migrations wait their turn behind it: a minute was not enough in CI on a busy 2-core machine.
 */
const CHURN_TIMEOUT_MS = 180_000;

describe.each(servers)('migrate() while another app changes its schema on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    `migrates ${SEQUENTIAL_PREFIXES} fresh prefixes, one after the other`,
    async () => {
      const url = databaseUrl(target);
      const prefixes = Array.from({ length: SEQUENTIAL_PREFIXES }, () => uniquePrefix());
      const failures: string[] = [];
      await whileOtherAppChangesItsSchema(target, url, async () => {
        for (const prefix of prefixes) {
          await guardOn(url, prefix)
            .guard.migrate()
            .catch((error: unknown) => void failures.push(`${prefix}: ${String(error)}`));
        }
      });
      expect(failures).toEqual([]);
      for (const prefix of prefixes) await expectUsable(url, prefix);
    },
    CHURN_TIMEOUT_MS,
  );

  it.skipIf(target.serverUrl === null)(
    `migrates one prefix from ${REPLICAS_AT_ONCE} processes at the same instant`,
    async () => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const workers = Array.from({ length: REPLICAS_AT_ONCE }, () => startWorker<MigrateMessage>('migrate-worker.ts', [url, prefix]));
      await Promise.all(workers.map((worker) => worker.next('ready')));
      let errors: (string | null)[] = [];
      await whileOtherAppChangesItsSchema(target, url, async () => {
        const startAt = Date.now() + 300;
        for (const worker of workers) worker.send({ startAt });
        const reports = await Promise.all(workers.map((worker) => worker.next<Extract<MigrateMessage, { type: 'done' }>>('done')));
        errors = reports.map((report) => report.error);
      });
      expect(errors).toEqual(Array(REPLICAS_AT_ONCE).fill(null));
      await expectUsable(url, prefix);
    },
    CHURN_TIMEOUT_MS,
  );
});

describe.each(servers.filter((target) => target.name === 'postgres'))(
  'migrate() into a schema while another app changes its own on $name',
  (target) => {
    it.skipIf(target.serverUrl === null)('creates the schema.prefix tables and migrates them', async () => {
      const url = databaseUrl(target);
      const schema = `cg_${uniquePrefix().slice(0, -1)}`;
      const raw = await openRaw(target.name, url);
      cleanups.push(async () => {
        try {
          await raw.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        } finally {
          await raw.close();
        }
      });
      const prefix = `${schema}.cg_`;
      await whileOtherAppChangesItsSchema(target, url, async () => {
        await guardOn(url, prefix).guard.migrate();
      });
      await expectUsable(url, prefix);
    });
  },
);

describe.each(servers.filter((target) => target.name === 'postgres'))('the tables migrate() looks for on $name', (target) => {
  it.skipIf(target.serverUrl === null)("are read as Kysely's introspector reads them, the named ones in one schema only", async () => {
    const url = databaseUrl(target);
    const schema = `cg_${uniquePrefix().slice(0, -1)}`;
    const other = `${schema}_other`;
    const raw = await openRaw(target.name, url);
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    try {
      await raw.exec(`CREATE SCHEMA ${schema}; CREATE SCHEMA ${other}`);
      for (const space of [schema, other]) {
        await raw.exec(
          `CREATE TABLE ${space}.kept (id serial PRIMARY KEY, n bigint GENERATED BY DEFAULT AS IDENTITY, note text NOT NULL DEFAULT 'x', at timestamptz(3));
           COMMENT ON COLUMN ${space}.kept.note IS 'a comment';
           CREATE VIEW ${space}.seen AS SELECT id, note FROM ${space}.kept;
           CREATE TABLE ${space}.unasked (id int)`,
        );
      }
      const kysely = (await db.introspection.getTables()).filter((table) => table.schema === schema && table.name !== 'unasked');
      expect(kysely.map((table) => table.name).sort()).toEqual(['kept', 'seen']);
      const found = await postgresDialect.findTables?.(db, schema, ['kept', 'seen', 'absent']);
      expect(found?.sort((a, b) => a.name.localeCompare(b.name))).toEqual(kysely.sort((a, b) => a.name.localeCompare(b.name)));
    } finally {
      await raw.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE; DROP SCHEMA IF EXISTS ${other} CASCADE`);
      await raw.close();
      await db.destroy();
    }
  });
});
