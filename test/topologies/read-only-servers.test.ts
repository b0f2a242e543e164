// A guard given a server that takes no writes (a PostgreSQL streaming standby; a MariaDB server set
// read-only, for a user without READ_ONLY ADMIN) fails closed, and says so once: migrate() rejects
// with READ_ONLY_DATABASE (also on tables that are up to date, where a migration writes nothing),
// `cronguard migrate` exits non-zero with it, and scheduled runs are skipped as errors with one log
// line that names the read-only server, never "run `cronguard migrate`?", and no LISTEN warning.
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard, GuardError } from '../../src/index.js';
import { startMariadb } from '../setup/databases.js';
import { uniquePrefix } from '../support/dialects.js';
import { recordingLogger, withGuardOn } from '../support/guards.js';
import { repoRoot, runProcess } from '../support/run-process.js';
import { startPostgresStandbyPair } from './support/postgres-standby.js';

const bin = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

async function untilPostgres(url: string, check: string): Promise<void> {
  for (;;) {
    const client = new pg.Client(url);
    await client.connect();
    try {
      if ((await client.query(check)).rows.length > 0) return;
    } finally {
      await client.end();
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** What a guard on `url` does: migrate (tables up to date, and none), the CLI, then two scheduled jobs. */
async function expectFailsClosed(url: string, prefix: string, kind: RegExp): Promise<void> {
  for (const tables of [prefix, uniquePrefix()]) {
    const migrated = withGuardOn(url, tables, (guard) => guard.migrate());
    await expect(migrated).rejects.toBeInstanceOf(GuardError);
    await expect(migrated).rejects.toMatchObject({ code: 'READ_ONLY_DATABASE', message: expect.stringMatching(kind) as unknown });
  }
  const cli = await runProcess(process.execPath, [bin, 'migrate', '--database', url, '--table-prefix', prefix], repoRoot);
  expect(cli.code).not.toBe(0);
  expect(`${cli.stdout}${cli.stderr}`).toMatch(kind);
  expect(`${cli.stdout}${cli.stderr}`).not.toMatch(/up to date/);

  // doctor --probe says it before anything runs.
  const report = await withGuardOn(url, prefix, (guard) => guard.probe());
  expect(report.checks.find((check) => check.check === 'read-only')).toMatchObject({ status: 'fail' });
  expect(report.status).toBe('fail');

  const logger = recordingLogger();
  const guard = createGuard({ database: url, tablePrefix: prefix, logger });
  const errors: string[] = [];
  const enough = new Promise<void>((resolve) => {
    guard.on('skipped', (event) => {
      if (event.reason === 'error') errors.push(event.error?.code ?? '');
      if (errors.length >= 6) resolve();
    });
  });
  try {
    for (const name of ['ro-a', 'ro-b']) guard.schedule('* * * * * *', { name, lockAtMostFor: '10s' }, () => Promise.resolve());
    await enough;
  } finally {
    await guard.shutdown({ timeout: '5s' });
  }
  const lines = [...logger.errors, ...logger.warnings];
  process.stderr.write(`\n[read-only ${url.split(':')[0]}] cronguard migrate: ${cli.stderr.trim()}\nlogged:\n${lines.join('\n')}\n`);
  expect(new Set(errors)).toEqual(new Set(['READ_ONLY_DATABASE']));
  expect(
    logger.errors.filter((line) => /read-only/.test(line)),
    lines.join('\n'),
  ).toHaveLength(1);
  expect(logger.errors[0]).toMatch(kind);
  expect(
    lines.filter((line) => /cronguard migrate|Listening/.test(line)),
    lines.join('\n'),
  ).toEqual([]);
}

describe.concurrent('a guard given a read-only server', () => {
  it('PostgreSQL streaming standby: fails closed, says "read-only standby" once', async () => {
    const pair = await startPostgresStandbyPair({ synchronous: false });
    try {
      const prefix = uniquePrefix();
      await withGuardOn(pair.primaryUrl, prefix, (guard) => guard.migrate());
      // The standby has replayed the tables.
      await untilPostgres(pair.standbyUrl, `select 1 from pg_tables where tablename = '${prefix}locks'`);
      await expectFailsClosed(pair.standbyUrl, prefix, /this database is a read-only standby/);
    } finally {
      await pair.stop();
    }
  });

  it('MariaDB with read_only on, for a user without READ_ONLY ADMIN: fails closed, says "read-only" once', async () => {
    const server = await startMariadb();
    try {
      const prefix = uniquePrefix();
      await withGuardOn(server.url, prefix, (guard) => guard.migrate());
      const root = await mysql.createConnection(server.url);
      try {
        await root.query("CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'app-secret'");
        await root.query("GRANT ALL PRIVILEGES ON cronguard_test.* TO 'app'@'127.0.0.1'");
        await root.query('SET GLOBAL read_only = 1');
      } finally {
        await root.end();
      }
      const url = server.url.replace('mysql://root@', 'mysql://app:app-secret@');
      await expectFailsClosed(url, prefix, /this database is a read-only (server|standby or a read-only server)/);
    } finally {
      await server.stop();
    }
  });
});
