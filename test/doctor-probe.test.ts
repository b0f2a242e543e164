// guard.probe() and `cronguard doctor --probe` on healthy servers, and on hazards set up for real
// here: statements inside a transaction, a read-only role, this process's clock shifted by faketime.
// The production topologies (PgBouncer, a standby, Galera) are probed in test/topologies.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import mysql from 'mysql2';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard, type ProbeReport } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { compiledCli } from './support/compiled-fixtures.js';

const bin = compiledCli();

function hasFaketime(): boolean {
  try {
    execFileSync('faketime', ['-f', '+0s', 'true']);
    return true;
  } catch {
    return false;
  }
}
const faketime = hasFaketime();
if (!faketime && process.env.CI === 'true') throw new Error('faketime is missing under CI=true: .ci/run installs it');

const statusOf = (report: ProbeReport, check: string): string | undefined => report.checks.find((c) => c.check === check)?.status;

async function cronguard(command: string[], args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(command[0] ?? process.execPath, [...command.slice(1), bin, ...args], {
      env: { ...process.env, CRONGUARD_DATABASE_URL: '', DATABASE_URL: '' },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe.each(dialectTargets())('guard.probe() on $name', (target) => {
  it.skipIf(target.serverUrl === null)('passes on a healthy server: one winner of the race, and nothing of it left behind', async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const { guard } = guardOn(url, prefix);
    await guard.migrate();
    const report = await guard.probe({ nodes: [url] });
    expect(report.checks.filter((c) => c.status === 'fail')).toEqual([]);
    expect(report.dialect).toBe(target.name);
    expect(report.server).toMatch(/^(PostgreSQL|MariaDB|MySQL|SQLite) \d/);
    expect(statusOf(report, 'read-only')).toBe('pass');
    expect(statusOf(report, 'autocommit')).toBe('pass');
    expect(statusOf(report, 'clock')).toBe('pass');
    expect(statusOf(report, 'node-clocks')).toBe('pass');
    const race = report.checks.find((c) => c.check === 'exclusivity');
    expect(race).toMatchObject({ status: 'pass' });
    expect(race?.finding).toContain('4 connections took one probe lock at once: 1 won');
    if (target.name === 'postgres') expect(statusOf(report, 'transaction-pooling')).toBe('pass');
    // The probe's lock row and its contenders' replica row are gone.
    expect((await guard.locks()).map((lock) => lock.name)).toEqual([]);
    expect((await guard.versions()).replicas).toEqual([]);
  });
});

describe.each(dialectTargets().filter((t) => t.name !== 'sqlite'))('guard.probe() on $name, handed a transaction', (target) => {
  it.skipIf(target.serverUrl === null)(
    "fails the autocommit check when the guard's pool leaves a transaction open (PostgreSQL: BEGIN at connect; MySQL: autocommit off)",
    async () => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      let end: () => Promise<void>;
      let database: pg.Pool | mysql.Pool;
      if (target.name === 'postgres') {
        const pool = new pg.Pool({ connectionString: url, max: 1 });
        pool.on('connect', (client) => void client.query('BEGIN'));
        [database, end] = [pool, () => pool.end()];
      } else {
        const pool = mysql.createPool({ uri: url, connectionLimit: 1 });
        pool.on('connection', (connection) => connection.query('SET autocommit = 0'));
        [database, end] = [pool, () => new Promise<void>((resolve) => pool.end(() => resolve()))];
      }
      try {
        const report = await createGuard({ database, tablePrefix: prefix }).probe({ contenders: 0 });
        expect(report.checks.find((c) => c.check === 'autocommit')).toMatchObject({ status: 'fail' });
        expect(report.status).toBe('fail');
      } finally {
        await end();
      }
    },
  );
});

describe('guard.probe() on hazards set up for real', () => {
  const postgres = dialectTargets().find((t) => t.name === 'postgres');
  const serverUrl = postgres?.serverUrl ?? null;

  it.skipIf(serverUrl === null)('fails read-only for a role whose transactions are read-only, and races nothing', async () => {
    const url = new URL(serverUrl ?? '');
    const role = `ro_${uniquePrefix()}`.slice(0, 40);
    const admin = new pg.Client({ connectionString: url.href });
    await admin.connect();
    try {
      // Identifiers cannot be bound: the role name is ours, made of [a-z0-9_] (uniquePrefix).
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'ro'`);
      await admin.query(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
      url.username = role;
      url.password = 'ro';
      const { guard } = guardOn(url.href, uniquePrefix());
      const report = await guard.probe();
      expect(report.checks.find((c) => c.check === 'read-only')).toMatchObject({ status: 'fail' });
      expect(report.checks.map((c) => c.check)).not.toContain('exclusivity');
    } finally {
      await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      await admin.end();
    }
  });

  it.skipIf(serverUrl === null || !faketime)(
    "warns when this process's clock is 30 s off the database's (cronguard doctor --probe under faketime)",
    async () => {
      const url = serverUrl ?? '';
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      const skewed = await cronguard(
        ['faketime', '-f', '+30s', process.execPath],
        ['doctor', '--probe', '--database', url, '--table-prefix', prefix],
      );
      expect(skewed.stderr).toBe('');
      expect(skewed.code).toBe(0);
      // faketime's +30 s and the probe's own round trip land anywhere near 30,000 ms (29,999 in one CI run).
      const skew = /clock\s+WARN\s+the database's clock is −(\d+) ms from this process's/.exec(skewed.stdout);
      expect(skew, skewed.stdout).not.toBeNull();
      expect(Math.abs(Number(skew?.[1]) - 30_000)).toBeLessThan(1_000);
      expect(skewed.stdout).toContain('clock: sync this host');
      const right = await cronguard([process.execPath], ['doctor', '--probe', '--json', '--database', url, '--table-prefix', prefix]);
      expect(right.code).toBe(0);
      const report = JSON.parse(right.stdout) as ProbeReport;
      expect(report.checks.find((c) => c.check === 'clock')).toMatchObject({ status: 'pass' });
    },
  );
});
