// `cronguard migrate` says what it did (issue #35): the migrations it applied, or that the tables
// were already up to date; and on MySQL/MariaDB, for a user without CREATE ROUTINE, that the take
// procedure was NOT created, what that costs and the GRANT to run. Through its command line.
import { describe, expect, it } from 'vitest';
import { baseMigrations, schemaMigrations, SCHEMA_VERSION } from '../migrations/index.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { ownDatabaseUrl } from './support/own-database.js';
import { openRaw } from './support/raw-database.js';
import { cronguard } from './support/cronguard-cli.js';

/** This version's migrations, in order (whichever a later version adds). */
const context = { tables: resolveTableNames('cronguard_', mysqlDialect), dialect: mysqlDialect };
const ALL = [...Object.keys(baseMigrations(context)), ...Object.keys(schemaMigrations(context))];

describe.each(dialectTargets())('cronguard migrate says what it did on $name', (target) => {
  it.skipIf(target.serverUrl === null)('lists the migrations it applied, then says the tables were already up to date', async () => {
    const common = ['--database', databaseUrl(target), '--table-prefix', uniquePrefix()];
    expect(ALL).toContain('006_take_procedure');
    expect(await cronguard(['migrate', ...common])).toEqual({
      code: 0,
      stdout: `cronguard: applied ${ALL.join(', ')} (schema version ${SCHEMA_VERSION})\n`,
      stderr: '',
    });
    expect(await cronguard(['migrate', ...common])).toEqual({
      code: 0,
      stdout: `cronguard: tables already up to date (schema version ${SCHEMA_VERSION}); nothing applied\n`,
      stderr: '',
    });
    const json = JSON.parse((await cronguard(['migrate', '--json', ...common])).stdout) as unknown;
    expect(json).toEqual({ migrated: true, schema: { database: SCHEMA_VERSION, code: SCHEMA_VERSION, applied: [], skippedRoutines: [] } });
  });
});

describe.each(dialectTargets().filter((target) => target.name === 'mysql'))(
  'cronguard migrate without CREATE ROUTINE on $name',
  (target) => {
    it.skipIf(target.serverUrl === null)(
      'says the take procedure was NOT created, what it costs and the GRANT; after the GRANT, creates it',
      async () => {
        const url = await ownDatabaseUrl(target);
        const schema = new URL(url).pathname.slice(1);
        const prefix = uniquePrefix();
        const procedure = takeProcedureName(resolveTableNames(prefix, mysqlDialect));
        const user = `${prefix}user`.slice(0, 32);
        const raw = await openRaw('mysql', url);
        try {
          // Every privilege the tables need, but not CREATE ROUTINE.
          await raw.exec(`CREATE USER '${user}'@'%' IDENTIFIED BY 'secret'`);
          await raw.exec(`GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP ON \`${schema}\`.* TO '${user}'@'%'`);
          const limited = new URL(url);
          limited.username = user;
          limited.password = 'secret';
          const common = ['--database', limited.toString(), '--table-prefix', prefix];
          const procedures = (): Promise<unknown[]> =>
            raw.query(`SELECT 1 FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?`, [procedure]);

          const first = await cronguard(['migrate', ...common]);
          expect(first.code).toBe(0);
          const [appliedLine, skippedLine, ...rest] = first.stdout.trimEnd().split('\n');
          expect(appliedLine).toContain('006_take_procedure');
          expect(rest).toEqual([]);
          expect(skippedLine).toContain(`the stored procedure ${procedure} was NOT created`);
          expect(skippedLine).toContain('lacks the CREATE ROUTINE privilege');
          expect(skippedLine).toContain('four statements instead of one call');
          const grant = `GRANT CREATE ROUTINE ON \`${schema}\`.* TO '${user}'@'%';`;
          expect(skippedLine).toContain(grant);
          expect(await procedures()).toEqual([]);
          // Nothing to apply, but the procedure is still missing: said again.
          const again = await cronguard(['migrate', ...common]);
          expect(again.stdout).toMatch(
            /^cronguard: tables already up to date .*; nothing applied\ncronguard: the stored procedure .* was NOT created/,
          );

          // The GRANT it printed, then migrate again: the procedure is created, nothing else said.
          await raw.exec(grant);
          expect(await cronguard(['migrate', ...common])).toEqual({
            code: 0,
            stdout: `cronguard: tables already up to date (schema version ${SCHEMA_VERSION}); nothing applied\n`,
            stderr: '',
          });
          expect(await procedures()).toHaveLength(1);
        } finally {
          await raw.exec(`DROP USER IF EXISTS '${user}'@'%'`);
          await raw.close();
        }
      },
    );
  },
);
