// The process's time zone, resolved once to an IANA name (UTC with one warning), and a stored zone
// a reader cannot use: a problem of that one job, never an exception for every ledger read.
import { describe, expect, it } from 'vitest';
import { createScheduleStore, type JobSchedule } from '../src/admin/job-schedules.js';
import type { Dialect } from '../src/core/dialect.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import { sqliteDialect } from '../src/dialects/sqlite/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { assertBuilt, describeResult, repoRoot, runProcess } from './support/run-process.js';

const DIALECTS: Record<string, Dialect<never>> = {
  mysql: mysqlDialect as Dialect<never>,
  postgres: postgresDialect as Dialect<never>,
  sqlite: sqliteDialect as Dialect<never>,
};

describe("the process's time zone", () => {
  it.each([
    { tz: '', zone: 'UTC', warnings: 1 },
    { tz: 'Mars/Olympus', zone: 'UTC', warnings: 1 },
    { tz: '/usr/share/zoneinfo/Europe/Paris', zone: 'Europe/Paris', warnings: 0 },
    { tz: 'EST5EDT', zone: 'America/New_York', warnings: 0 },
    { tz: 'Europe/Paris', zone: 'Europe/Paris', warnings: 0 },
  ])('TZ=$tz is $zone, with $warnings warning(s) however often it is asked', async ({ tz, zone, warnings }) => {
    assertBuilt();
    const script = `
      const { processTimeZone } = await import(${JSON.stringify(`${repoRoot}dist/src/core/cron-slots.js`)});
      const warned = [];
      const logger = { debug() {}, info() {}, warn: (m) => warned.push(m), error() {} };
      const zones = [processTimeZone(logger), processTimeZone(logger), processTimeZone()];
      console.log(JSON.stringify({ zones, warned }));`;
    const previous = process.env['TZ'];
    process.env['TZ'] = tz;
    const result = await runProcess(process.execPath, ['--input-type=module', '-e', script], repoRoot).finally(() => {
      if (previous === undefined) delete process.env['TZ'];
      else process.env['TZ'] = previous;
    });
    expect(result.code, describeResult('node', result)).toBe(0);
    const { zones, warned } = JSON.parse(result.stdout) as { zones: string[]; warned: string[] };
    expect(zones).toEqual([zone, zone, zone]);
    expect(warned).toHaveLength(warnings);
    if (warnings > 0) expect(warned[0]).toContain('Set TZ to an IANA name');
  });
});

describe.each(dialectTargets())('a stored zone a reader cannot use, on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it("is that job's problem, listed with the fix: the other jobs' ledgers read as ever", async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const dialect = DIALECTS[target.name] as Dialect<never>;
      const db = loggedKysely(target, url, []);
      try {
        const schedule = (name: string, timezone: string): JobSchedule => ({
          name,
          expression: '* * * * *',
          timezone,
          lockAtMostForMs: 60_000,
          lockAtLeastForMs: 0,
          catchUpMs: null,
        });
        // What a replica of 0.2.0 started with TZ="" declared.
        await createScheduleStore(db, dialect, resolveTableNames(prefix, dialect)).declare(
          [schedule('unknown-zone', 'Etc/Unknown'), schedule('paris', 'Europe/Paris')],
          'replica-tz-empty',
        );
        const ledgers = await guard.slots();
        expect(ledgers.map((ledger) => [ledger.job, ledger.problem === undefined])).toEqual([
          ['paris', true],
          ['unknown-zone', false],
        ]);
        const problem = ledgers.find((ledger) => ledger.job === 'unknown-zone')?.problem ?? '';
        expect(problem).toContain('Etc/Unknown');
        expect(problem).toContain('replica-tz-empty');
        expect(problem).toContain('give the job a `timezone`');
      } finally {
        await db.destroy();
      }
    });
  });
});
