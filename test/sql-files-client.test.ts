// The plain SQL files under migrations/sql apply as shipped with each database's own command-line
// client, the command migrations/sql/README.md gives (issue #35: MySQL's 006 failed with ERROR 1064
// under `mariadb db < 006_take_procedure.sql`, its DELIMITER only mentioned in a comment). Each
// runs on a database of its own: the files use the default prefix, `cronguard_`.
import { spawn } from 'node:child_process';
import { openSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SCHEMA_VERSION } from '../migrations/index.js';
import { takeProcedureName } from '../src/dialects/mysql/schema.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { sqlitePath } from '../src/dialects/sqlite/connection.js';
import type { DialectName } from '../src/index.js';
import { dialectTargets } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { ownDatabaseUrl } from './support/own-database.js';
import { openRaw } from './support/raw-database.js';

interface ClientResult {
  readonly code: number | null;
  readonly output: string;
}

/** Runs `command` with `file` as its standard input, as `command < file` would. */
function withInput(command: string, args: readonly string[], file: string, env: NodeJS.ProcessEnv = {}): Promise<ClientResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: [openSync(file, 'r'), 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** The README's command for one file of `dialect` on the database at `url`. */
function applyWithClient(dialect: DialectName, url: string, file: string): Promise<ClientResult> {
  if (dialect === 'sqlite') return withInput('sqlite3', ['-bail', sqlitePath(url)], file);
  const parsed = new URL(url);
  const database = decodeURIComponent(parsed.pathname.slice(1));
  const password = { [dialect === 'mysql' ? 'MYSQL_PWD' : 'PGPASSWORD']: decodeURIComponent(parsed.password) };
  const user = decodeURIComponent(parsed.username);
  if (dialect === 'mysql') {
    return withInput('mariadb', ['--host', parsed.hostname, '--port', parsed.port, '--user', user, database], file, password);
  }
  return withInput(
    'psql',
    ['-v', 'ON_ERROR_STOP=1', '--quiet', '--host', parsed.hostname, '--port', parsed.port, '--username', user, database],
    file,
    password,
  );
}

describe.each(dialectTargets())('the plain SQL files through the command-line client on $name', (target) => {
  it.skipIf(target.serverUrl === null)('apply as shipped, in order, and migrate() then finds nothing to do', async () => {
    const url = await ownDatabaseUrl(target);
    const dir = fileURLToPath(new URL(`../migrations/sql/${target.name}/`, import.meta.url));
    const files = readdirSync(dir)
      .filter((file) => file.endsWith('.sql'))
      .sort();
    expect(files.length).toBe(SCHEMA_VERSION);
    for (const file of files) {
      const result = await applyWithClient(target.name, url, `${dir}${file}`);
      expect(result, file).toEqual({ code: 0, output: '' });
    }
    if (target.name === 'mysql') {
      const raw = await openRaw('mysql', url);
      try {
        const procedure = takeProcedureName(resolveTableNames('cronguard_', mysqlDialect));
        const rows = await raw.query(
          `SELECT routine_name FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?`,
          [procedure],
        );
        expect(rows).toHaveLength(1);
      } finally {
        await raw.close();
      }
    }
    const { guard } = guardOn(url, 'cronguard_');
    expect(await guard.migrate()).toMatchObject({ database: SCHEMA_VERSION, code: SCHEMA_VERSION });
    expect((await guard.run({ name: 'after-the-files', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
  });
});
