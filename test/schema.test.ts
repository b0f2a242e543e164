// migrate() and the plain SQL files under migrations/sql must give the same tables.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { DialectName } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';
import { withoutClientDelimiters } from './support/client-scripts.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
/** The take procedure's name for a table prefix (src/dialects/mysql/schema.ts). */
const takeProcedureOf = (prefix: string): string => takeProcedureName(resolveTableNames(prefix, mysqlDialect));

const TABLES = ['locks', 'runs', 'replicas', 'schema_migrations', 'controls', 'jobs', 'declarations'];

function sqlFiles(dialect: DialectName): string[] {
  const dir = new URL(`../migrations/sql/${dialect}/`, import.meta.url);
  return (
    readdirSync(dir)
      .filter((file) => file.endsWith('.sql'))
      .sort()
      // Written for the command-line clients: sent through the driver as the server takes them.
      .map((file) => withoutClientDelimiters(readFileSync(new URL(file, dir), 'utf8')))
  );
}

/** Columns, keys and indexes of one table, with the prefix taken out of every name. */
async function describeTable(raw: RawDatabase, dialect: DialectName, prefix: string, table: string): Promise<unknown> {
  const name = `${prefix}${table}`;
  const unprefixed = (value: unknown): unknown => (typeof value === 'string' ? value.split(prefix).join('<prefix>') : value);
  const clean = (rows: Record<string, unknown>[]): unknown =>
    rows.map((row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, unprefixed(value)])));
  if (dialect === 'postgres') {
    return {
      columns: clean(
        await raw.query(
          `SELECT column_name, data_type, character_maximum_length, datetime_precision, is_nullable, column_default
             FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`,
          [name],
        ),
      ),
      indexes: clean(await raw.query(`SELECT indexdef FROM pg_indexes WHERE tablename = ? ORDER BY indexdef`, [name])),
    };
  }
  if (dialect === 'mysql') {
    return {
      columns: clean(
        await raw.query(
          `SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, CHARACTER_SET_NAME, COLLATION_NAME
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
          [name],
        ),
      ),
      table: clean(
        await raw.query(
          `SELECT ENGINE, TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`,
          [name],
        ),
      ),
      indexes: clean(
        await raw.query(
          `SELECT INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME FROM information_schema.STATISTICS
            WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
          [name],
        ),
      ),
    };
  }
  return {
    columns: clean(await raw.query(`SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_xinfo(?)`, [name])),
    table: clean(await raw.query(`SELECT type, ncol, wr, strict FROM pragma_table_list(?)`, [name])),
    indexes: clean(await raw.query(`SELECT name, "unique", origin, partial FROM pragma_index_list(?) ORDER BY name`, [name])),
  };
}

describe.each(dialectTargets())('schema on $name', (target) => {
  it.skipIf(target.serverUrl === null)('is the same from migrate() and from the plain SQL files', async () => {
    const url = databaseUrl(target);
    const migrated = uniquePrefix();
    const byHand = uniquePrefix();
    await guardOn(url, migrated).guard.migrate();
    const raw = await openRaw(target.name, url);
    try {
      const files = sqlFiles(target.name);
      expect(files.length).toBeGreaterThan(0);
      // The take procedure's name carries a hash of the prefix: the file's is the default prefix's.
      const byHandFile = (file: string): string =>
        file.split(takeProcedureOf('cronguard_')).join(takeProcedureOf(byHand)).split('cronguard_').join(byHand);
      for (const file of files) await raw.exec(byHandFile(file));
      for (const table of TABLES) {
        const fromMigrate = await describeTable(raw, target.name, migrated, table);
        const marker = { schema_migrations: 'timestamp', controls: 'changed_at', jobs: 'cron_expression' }[table] ?? 'locked_by';
        expect(JSON.stringify(fromMigrate)).toContain(marker);
        expect(await describeTable(raw, target.name, byHand, table)).toEqual(fromMigrate);
      }
      // MySQL's take procedure (migration 006): the same body, security and access either way.
      if (target.name === 'mysql') {
        const routine = async (prefix: string): Promise<unknown> =>
          (
            await raw.query<Record<string, unknown>>(
              `SELECT routine_definition, security_type, sql_data_access FROM information_schema.routines
                WHERE routine_schema = DATABASE() AND routine_name = ?`,
              [takeProcedureOf(prefix)],
            )
          ).map((row) => JSON.stringify(row).split(prefix).join('<prefix>'));
        const fromMigrate = await routine(migrated);
        expect(JSON.stringify(fromMigrate)).toContain('JSON_TABLE');
        expect(await routine(byHand)).toEqual(fromMigrate);
      }
      // A team that applied the files by hand can still call migrate() afterwards.
      await guardOn(url, byHand).guard.migrate();
    } finally {
      await raw.close();
    }
  });
});

describe.each(dialectTargets())('a migration cut short on $name', (target) => {
  it.skipIf(target.serverUrl === null)('gets its indexes from the next migrate() when the runs table exists without them', async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const { guard } = guardOn(url, prefix);
    await guard.migrate();
    const raw = await openRaw(target.name, url);
    try {
      const complete = await describeTable(raw, target.name, prefix, 'runs');
      // What a process killed between MySQL's CREATE TABLE and CREATE INDEX leaves: the table, no
      // indexes, and the migration not recorded (each MySQL DDL statement commits by itself).
      for (const index of ['runs_job_started', 'runs_started']) {
        await raw.exec(target.name === 'mysql' ? `DROP INDEX ${prefix}${index} ON ${prefix}runs` : `DROP INDEX ${prefix}${index}`);
      }
      // The later migrations go too: the migrator refuses a gap before an executed one.
      await raw.query(`DELETE FROM ${prefix}migrations WHERE name >= ?`, ['002_create_runs']);
      expect(await describeTable(raw, target.name, prefix, 'runs')).not.toEqual(complete);
      await guardOn(url, prefix).guard.migrate();
      expect(await describeTable(raw, target.name, prefix, 'runs')).toEqual(complete);
    } finally {
      await raw.close();
    }
  });
});

describe.each(dialectTargets().filter((target) => target.name === 'postgres'))('tables in another schema on $name', (target) => {
  it.skipIf(target.serverUrl === null)("are not taken for a prefix without a schema (another environment's schema.prefix)", async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const other = `s${prefix.slice(0, -1)}`;
    const raw = await openRaw(target.name, url);
    try {
      await raw.exec(`CREATE SCHEMA ${other}`);
      // Staging's tables, in their own schema, with the same table names as production's.
      await guardOn(url, `${other}.${prefix}`).guard.migrate();
      const production = guardOn(url, prefix).guard;
      await production.migrate();
      expect(await production.run({ name: 'nightly', lockAtMostFor: '1m' }, () => 'ran')).toEqual({
        executed: true,
        value: 'ran',
      });
      const [row] = await raw.query<{ n: string | number }>(
        `SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE ?`,
        [`${prefix}%`],
      );
      // locks, runs, replicas, controls, jobs, declarations, the two ledgers' two tables each, and the migration lease.
      expect(Number(row?.n)).toBe(11);
    } finally {
      await raw.exec(`DROP SCHEMA ${other} CASCADE`);
      await raw.close();
    }
  });
});
