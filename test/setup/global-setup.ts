// vitest globalSetup: one PostgreSQL and one MariaDB server for the whole run.
import type { TestProject } from 'vitest/node';
import { findMariadbd, startMariadb, startPostgres, type RunningDatabase } from './databases.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the `cronguard_test` PostgreSQL database. */
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

function startMariadbOrSkip(): Promise<RunningDatabase | null> {
  const url = envUrl('CRONGUARD_TEST_MYSQL_URL');
  if (url !== undefined) return Promise.resolve(external(url));
  if (findMariadbd() !== undefined) return startMariadb();
  // CI must never pass by silently skipping a whole dialect.
  if (process.env['CI'] === 'true') {
    return Promise.reject(new Error('cronguard: mariadbd not found and CI=true; .ci/run should have installed mariadb-server'));
  }
  process.stderr.write(
    '\n*** cronguard: MySQL/MariaDB tests are SKIPPED: mariadbd not found. Install it with: apt-get install -y mariadb-server ***\n\n',
  );
  return Promise.resolve(null);
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const postgresEnv = envUrl('CRONGUARD_TEST_POSTGRES_URL');
  const [postgres, mariadb] = await Promise.allSettled([
    postgresEnv !== undefined ? Promise.resolve(external(postgresEnv)) : startPostgres(),
    startMariadbOrSkip(),
  ]);

  const running: RunningDatabase[] = [];
  if (postgres.status === 'fulfilled') running.push(postgres.value);
  if (mariadb.status === 'fulfilled' && mariadb.value !== null) running.push(mariadb.value);
  const teardown = async (): Promise<void> => {
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

  project.provide('postgresUrl', postgres.value.url);
  project.provide('mysqlUrl', mariadb.value === null ? null : mariadb.value.url);
  return teardown;
}
