// vitest globalSetup: one PostgreSQL and one MariaDB server for the whole run.
import type { TestProject } from 'vitest/node';
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { findMariadbd, startMariadb, startPostgres, type RunningDatabase } from './databases.js';
import { compileTestPrograms, TEST_PROGRAMS_VARIABLE } from '../support/compiled-fixtures.js';
import { repoRoot } from '../support/run-process.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the `cronguard_test` PostgreSQL database, or null when `CRONGUARD_TEST_DIALECTS` leaves it out. */
    postgresUrl: string | null;
    /** URL of the `cronguard_test` MariaDB database, or null when MariaDB tests are skipped. */
    mysqlUrl: string | null;
  }
}

/** A server we did not start and must not stop. */
function external(url: string): RunningDatabase {
  return { url, stop: () => Promise.resolve() };
}

function envUrl(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/**
 * The dialects whose servers this run starts: every one, unless `CRONGUARD_TEST_DIALECTS` names some
 * (`sqlite`, `postgres`, `mysql`, comma-separated) for a quicker inner loop (`npm run test:sqlite`):
 * the others' tests are then skipped, with one loud line. Never under CI=true: CI runs every dialect.
 */
function chosenDialects(): Set<string> {
  const all = ['sqlite', 'postgres', 'mysql'];
  const value = envUrl('CRONGUARD_TEST_DIALECTS');
  if (value === undefined) return new Set(all);
  const chosen = value.split(',').map((name) => name.trim());
  const unknown = chosen.filter((name) => !all.includes(name));
  if (unknown.length > 0)
    throw new Error(`cronguard: CRONGUARD_TEST_DIALECTS names no dialect ${unknown.join(', ')}; use ${all.join(', ')}`);
  if (process.env['CI'] === 'true') throw new Error('cronguard: CRONGUARD_TEST_DIALECTS is set and CI=true; CI runs every dialect');
  const skipped = all.filter((name) => !chosen.includes(name));
  if (skipped.length > 0) {
    process.stderr.write(`\n*** cronguard: ${skipped.join(' and ')} tests are SKIPPED: CRONGUARD_TEST_DIALECTS=${value} ***\n\n`);
  }
  return new Set(chosen);
}

/**
 * The shared MariaDB commits without waiting for the disk: Kysely's migrator holds one server-wide
 * GET_LOCK while it migrates, so every test's migrate() (a dozen DDL statements, each synced to
 * disk) waits for the others', whichever file it runs in; unsynced, they took about half as long
 * here. Committed data still survives the server's own exit (the log is written at each commit),
 * which is all a restart in the fault scenarios needs. Not for the benchmark's servers.
 */
const TEST_MARIADB_FLAGS = ['--innodb-flush-log-at-trx-commit=2', '--innodb-flush-method=nosync', '--skip-innodb-doublewrite'];

function startMariadbOrSkip(): Promise<RunningDatabase | null> {
  const url = envUrl('CRONGUARD_TEST_MYSQL_URL');
  if (url !== undefined) return Promise.resolve(external(url));
  if (findMariadbd() !== undefined) return startMariadb({ serverFlags: TEST_MARIADB_FLAGS });
  // CI must never pass by silently skipping a whole dialect.
  if (process.env['CI'] === 'true') {
    return Promise.reject(new Error('cronguard: mariadbd not found and CI=true; .ci/run should have installed mariadb-server'));
  }
  process.stderr.write(
    '\n*** cronguard: MySQL/MariaDB tests are SKIPPED: mariadbd not found. Install it with: apt-get install -y mariadb-server ***\n\n',
  );
  return Promise.resolve(null);
}

/**
 * The worker fixtures and the CLI, compiled and bundled once for the run (compiled-fixtures.ts):
 * every test process finds them through the variable its workers inherit. Without a build, each
 * test that starts a program fails with the build's message instead.
 */
function compilePrograms(): (() => void) | undefined {
  const root = join(repoRoot, '.tmp', `fixtures-${process.pid}`);
  try {
    process.env[TEST_PROGRAMS_VARIABLE] = compileTestPrograms(root, false);
  } catch (error) {
    process.stderr.write(`cronguard: the test programs were not compiled: ${error instanceof Error ? error.message : String(error)}\n`);
    return undefined;
  }
  return () => rmSync(root, { recursive: true, force: true });
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const removePrograms = compilePrograms();
  const postgresEnv = envUrl('CRONGUARD_TEST_POSTGRES_URL');
  const dialects = chosenDialects();
  const [postgres, mariadb] = await Promise.allSettled([
    !dialects.has('postgres')
      ? Promise.resolve(null)
      : postgresEnv !== undefined
        ? Promise.resolve(external(postgresEnv))
        : startPostgres(),
    dialects.has('mysql') ? startMariadbOrSkip() : Promise.resolve(null),
  ]);

  const running: RunningDatabase[] = [];
  if (postgres.status === 'fulfilled' && postgres.value !== null) running.push(postgres.value);
  if (mariadb.status === 'fulfilled' && mariadb.value !== null) running.push(mariadb.value);
  const teardown = async (): Promise<void> => {
    removePrograms?.();
    const results = await Promise.allSettled(running.map((db) => db.stop()));
    const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failures.length > 0) {
      throw new AggregateError(
        failures.map((f) => f.reason),
        'cronguard: stopping test databases failed',
      );
    }
  };

  if (postgres.status === 'rejected' || mariadb.status === 'rejected') {
    // Do not leak the server that did start.
    await teardown().catch(() => undefined);
    const reasons = [postgres, mariadb]
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => (r.reason instanceof Error ? r.reason.message : String(r.reason)));
    throw new Error(reasons.join('\n\n'));
  }

  project.provide('postgresUrl', postgres.value === null ? null : postgres.value.url);
  project.provide('mysqlUrl', mariadb.value === null ? null : mariadb.value.url);
  return teardown;
}
