// Upgrading from 0.1.0: the ledger 0.1.0 reads stays as it knows it, a newer schema does not stop an
// older guard, an older schema is said once, and the versions of lock holders show.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { schemaMigrations, SCHEMA_VERSION } from '../migrations/index.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { dialectTargets, uniquePrefix } from './support/dialects.js';
import { ownDatabaseUrl } from './support/own-database.js';
import { guardOn, recordingLogger } from './support/guards.js';
import { importOldRelease, type OldGuard } from './support/old-release.js';
import { openRaw } from './support/raw-database.js';
import { compiledCli } from './support/compiled-fixtures.js';

const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const newBin = compiledCli();

const oldGuards: OldGuard[] = [];
afterEach(async () => {
  await Promise.all(oldGuards.splice(0).map((guard) => guard.close()));
});

async function oldGuardOn(url: string, prefix: string, lockedBy = 'old-replica') {
  const old = await importOldRelease();
  const logger = recordingLogger();
  const guard = old.createGuard({ database: url, tablePrefix: prefix, lockedBy, logger });
  oldGuards.push(guard);
  return { guard, logger, bin: old.bin };
}

async function cli(bin: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, ...args], {
      env: { ...process.env, CRONGUARD_DATABASE_URL: '', DATABASE_URL: '' },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** The migrations after 0.1.0's two (003 on): what the new version's migrate() applies on its tables. */
const AFTER_0_1_0 = Object.keys(schemaMigrations({ tables: resolveTableNames('cronguard_', mysqlDialect), dialect: mysqlDialect }));

describe.each(dialectTargets())('upgrading from 0.1.0 on $name', (target) => {
  it.skipIf(target.serverUrl === null)("lets a 0.1.0 replica restart and migrate() after the new version's migrate()", async () => {
    const url = await ownDatabaseUrl(target);
    const prefix = uniquePrefix();
    const old = await oldGuardOn(url, prefix);
    await old.guard.migrate();
    const { guard, logger } = guardOn(url, prefix, { lockedBy: 'new-replica' });
    expect(await guard.migrate()).toEqual({ database: SCHEMA_VERSION, code: SCHEMA_VERSION, applied: AFTER_0_1_0, skippedRoutines: [] });
    // A 0.1.0 replica restarting during the rolling deploy calls migrate() first, as its README said.
    const restarted = await oldGuardOn(url, prefix, 'old-restarted');
    await expect(restarted.guard.migrate()).resolves.toBeUndefined();
    expect((await restarted.guard.run({ name: 'job', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
    expect((await guard.run({ name: 'job', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
    expect([...old.logger.errors, ...old.logger.warnings, ...restarted.logger.errors, ...restarted.logger.warnings]).toEqual([]);
    expect([...logger.errors, ...logger.warnings]).toEqual([]);
  });

  it.skipIf(target.serverUrl === null)('migrates and runs on tables a newer version migrated further than it knows', async () => {
    const url = await ownDatabaseUrl(target);
    const prefix = uniquePrefix();
    const { guard, logger } = guardOn(url, prefix);
    await guard.migrate();
    const raw = await openRaw(target.name, url);
    try {
      await raw.query(`INSERT INTO ${prefix}schema_migrations (name, timestamp) VALUES (?, ?)`, [
        '999_from_a_newer_version',
        new Date().toISOString(),
      ]);
    } finally {
      await raw.close();
    }
    const older = guardOn(url, prefix);
    expect(await older.guard.migrate()).toEqual({ database: 999, code: SCHEMA_VERSION, applied: [], skippedRoutines: [] });
    expect((await older.guard.run({ name: 'job', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
    expect((await older.guard.versions()).schema).toEqual({ database: 999, code: SCHEMA_VERSION });
    expect([...logger.errors, ...logger.warnings, ...older.logger.errors, ...older.logger.warnings]).toEqual([]);
  });

  it.skipIf(target.serverUrl === null)(
    'says once, naming `cronguard migrate`, that the tables are older than it needs, and runs its jobs',
    async () => {
      const url = await ownDatabaseUrl(target);
      const prefix = uniquePrefix();
      // Tables as 0.1.0 left them: nobody ran the new version's migrate.
      await (await oldGuardOn(url, prefix)).guard.migrate();
      const { guard, logger } = guardOn(url, prefix, { lockedBy: 'not-migrated' });
      for (let tick = 0; tick < 5; tick += 1) {
        expect((await guard.run({ name: `job-${tick % 2}`, lockAtMostFor: '1m' }, () => tick)).executed).toBe(true);
      }
      await expect.poll(() => logger.warnings.length, { timeout: 10_000 }).toBe(1);
      expect(logger.warnings[0]).toMatch(
        new RegExp(`^SCHEMA_OUTDATED: .*schema version 2; .* needs ${SCHEMA_VERSION}\\b.*\`cronguard migrate\``),
      );
      for (let tick = 0; tick < 5; tick += 1) await guard.run({ name: 'job-0', lockAtMostFor: '1m' }, () => tick);
      expect(logger.warnings).toHaveLength(1);
      expect(logger.errors).toEqual([]);
      expect(await guard.versions()).toMatchObject({ schema: { database: 2, code: SCHEMA_VERSION }, replicas: [] });
      expect((await guard.locks()).map((lock) => lock.version)).toEqual([null, null]);
    },
  );

  it.skipIf(target.serverUrl === null)('shows the cronguard version of each lock holder: recorded, or none for 0.1.0', async () => {
    const url = await ownDatabaseUrl(target);
    const prefix = uniquePrefix();
    const { guard } = guardOn(url, prefix, { lockedBy: 'new-replica' });
    await guard.migrate();
    const old = await oldGuardOn(url, prefix);
    // Both keep their locks a minute after they return, so both show as holders.
    await old.guard.run({ name: 'old-job', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 1);
    await guard.run({ name: 'new-job', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 1);
    await expect
      .poll(async () => (await guard.locks()).map((lock) => [lock.name, lock.lockedBy, lock.version]), {
        timeout: 10_000,
      })
      .toEqual([
        ['new-job', 'new-replica', version],
        ['old-job', 'old-replica', null],
      ]);
    expect((await guard.doctor()).map((job) => [job.job, job.lockedBy, job.version])).toEqual([
      ['new-job', 'new-replica', version],
      ['old-job', 'old-replica', null],
    ]);
    const report = await guard.versions();
    expect(report.package).toBe(version);
    expect(report.replicas.map((replica) => [replica.lockedBy, replica.version])).toEqual([['new-replica', version]]);
    expect(report.holders).toEqual([
      { job: 'new-job', lockedBy: 'new-replica', version },
      { job: 'old-job', lockedBy: 'old-replica', version: null },
    ]);
    const common = ['--database', url, '--table-prefix', prefix];
    const locks = await cli(newBin, ['locks', ...common]);
    expect(locks.stdout).toMatch(new RegExp(`^new-job +held +no +new-replica +${version.replaceAll('.', '\\.')} `, 'm'));
    expect(locks.stdout).toMatch(/^old-job +held +no +old-replica +< 0\.2\.0 /m);
    const versions = await cli(newBin, ['versions', ...common]);
    expect(versions).toMatchObject({ code: 0, stderr: '' });
    expect(versions.stdout).toMatch(
      new RegExp(
        `^schema version ${SCHEMA_VERSION} \\(this cronguard, ${version.replaceAll('.', '\\.')}, needs ${SCHEMA_VERSION}\\)$`,
        'm',
      ),
    );
    expect(versions.stdout).toMatch(new RegExp(`^new-replica +${version.replaceAll('.', '\\.')} `, 'm'));
    expect(versions.stdout).toMatch(/^old-job +old-replica +< 0\.2\.0$/m);
  });

  it.skipIf(target.serverUrl === null)(
    'reads the history 0.1.0 wrote, after migrating its tables, as 0.1.0 read it: history(), doctor() and the CLI',
    async () => {
      const url = await ownDatabaseUrl(target);
      const prefix = uniquePrefix();
      const old = await oldGuardOn(url, prefix);
      await old.guard.migrate();
      await old.guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => 'done');
      await old.guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => new Promise((resolve) => setTimeout(resolve, 30)));
      await old.guard.run({ name: 'kept', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 1);
      await expect(old.guard.run({ name: 'broken', lockAtMostFor: '1m' }, () => Promise.reject(new Error('no route')))).rejects.toThrow(
        'no route',
      );
      const common = ['--database', url, '--table-prefix', prefix];
      const before = {
        history: await old.guard.history({ limit: 100 }),
        doctor: await old.guard.doctor(),
        historyText: await cli(old.bin, ['history', ...common]),
        historyJson: await cli(old.bin, ['history', '--json', ...common]),
        doctorJson: await cli(old.bin, ['doctor', '--json', ...common]),
      };
      expect(before.history.runs).toHaveLength(4);
      expect(before.historyText).toMatchObject({ code: 0, stderr: '' });

      const { guard, logger } = guardOn(url, prefix);
      expect(await guard.migrate()).toEqual({ database: SCHEMA_VERSION, code: SCHEMA_VERSION, applied: AFTER_0_1_0, skippedRoutines: [] });
      // Each run now also says who triggered it (migration 004): nobody, for what 0.1.0 ran.
      const runs = before.history.runs.map((run) => ({ ...run, triggeredBy: null }));
      expect(await guard.history({ limit: 100 })).toEqual({ ...before.history, runs });
      const doctor = await guard.doctor();
      expect(doctor).toHaveLength(before.doctor.length);
      // doctor() says more since 0.1.0 (cancelled runs, the holder and its version): what 0.1.0 said is unchanged.
      before.doctor.forEach((diagnosis, index) =>
        expect(doctor[index]).toMatchObject({ ...diagnosis, lockedBy: 'old-replica', version: null }),
      );
      // The same rows and columns; durations and times are written as the dashboard writes them since
      // 0.2.0's successor ("250 ms", "… UTC"; 0.1.0: "250ms", "…Z"), so those are compared as placeholders.
      const historyText = await cli(newBin, ['history', ...common]);
      expect({ ...historyText, stdout: withoutTimes(historyText.stdout) }).toEqual({
        ...before.historyText,
        stdout: withoutTimes(before.historyText.stdout),
      });
      const historyJson = await cli(newBin, ['history', '--json', ...common]);
      expect({ ...historyJson, stdout: '' }).toEqual({ ...before.historyJson, stdout: '' });
      const oldPage = JSON.parse(before.historyJson.stdout) as { runs: Record<string, unknown>[] };
      expect(JSON.parse(historyJson.stdout)).toEqual({
        ...oldPage,
        runs: oldPage.runs.map((run) => ({ ...run, triggeredBy: null })),
      });
      const doctorJson = await cli(newBin, ['doctor', '--json', ...common]);
      expect(doctorJson.code).toBe(before.doctorJson.code);
      const oldDiagnoses = JSON.parse(before.doctorJson.stdout) as Record<string, unknown>[];
      const newDiagnoses = JSON.parse(doctorJson.stdout) as Record<string, unknown>[];
      expect(newDiagnoses).toHaveLength(oldDiagnoses.length);
      oldDiagnoses.forEach((diagnosis, index) => expect(newDiagnoses[index]).toMatchObject(diagnosis));
      expect([...logger.errors, ...logger.warnings, ...old.logger.errors, ...old.logger.warnings]).toEqual([]);
    },
  );
});

/** A CLI table with its times and durations as placeholders, and runs of spaces as one. */
function withoutTimes(text: string): string {
  return text
    .replace(/\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?: UTC|Z)/g, 'TIME')
    .replace(/\b\d+(?:\.\d+)? ?(?:ms|s|min|m|h)\b/g, 'DURATION')
    .replace(/—/g, '-')
    .replace(/ +/g, ' ');
}
