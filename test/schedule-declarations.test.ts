// The slot ledger's schedule declarations (src/admin/job-schedules.ts): one statement declares many
// jobs; a row the server refuses fails alone, never the jobs declared beside it. And an expression
// longer than the `cron_expression` column is refused before it gets there.
import { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { createScheduleStore, type JobSchedule } from '../src/admin/job-schedules.js';
import type { Dialect } from '../src/core/dialect.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import { sqliteDialect } from '../src/dialects/sqlite/dialect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';

const DIALECTS: Record<string, Dialect<never>> = {
  mysql: mysqlDialect as Dialect<never>,
  postgres: postgresDialect as Dialect<never>,
  sqlite: sqliteDialect as Dialect<never>,
};
const list = (from: number, to: number): string => Array.from({ length: to - from + 1 }, (_, i) => String(from + i)).join(',');
/** A valid expression of 347 characters: every second and every minute, listed. */
const LONG_EXPRESSION = `${list(0, 59)} ${list(0, 59)} * * * *`;

const schedule = (name: string, expression: string): JobSchedule => ({
  name,
  expression,
  timezone: 'UTC',
  lockAtMostForMs: 60_000,
  lockAtLeastForMs: 0,
  catchUpMs: null,
});

describe('an expression longer than the schedule column', () => {
  it('is 347 characters and valid', () => {
    expect(LONG_EXPRESSION).toHaveLength(347);
  });

  it('is a TypeError naming the limit, from guard.schedule and from the `cron` option', async () => {
    const guard = createGuard({ database: 'sqlite::memory:' });
    try {
      expect(() => guard.schedule(LONG_EXPRESSION, { name: 'listed', lockAtMostFor: '1m' }, () => 1)).toThrow(
        new TypeError(
          `Expected the cron expression of job "listed" to be at most 255 characters long (the slot ledger's column), got 347: ${JSON.stringify(LONG_EXPRESSION)}`,
        ),
      );
      expect(() => guard.resolveJob({ name: 'listed', lockAtMostFor: '1m', cron: LONG_EXPRESSION })).toThrow(
        new TypeError(
          `Expected \`cron\` of job "listed" to be at most 255 characters long (the slot ledger's column), got 347: ${JSON.stringify(LONG_EXPRESSION)}`,
        ),
      );
      // The longest of these lists that fits is taken.
      let minutes = 59;
      while (`${list(0, 59)} ${list(0, minutes)} * * * *`.length > 255) minutes -= 1;
      const fits = `${list(0, 59)} ${list(0, minutes)} * * * *`;
      expect(fits.length).toBeGreaterThan(250);
      const task = guard.schedule(fits, { name: 'fits', lockAtMostFor: '1m' }, () => 1);
      await task.destroy();
    } finally {
      await guard.close();
    }
  });
});

describe.each(dialectTargets())('declarations on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('a row the server refuses fails alone: the jobs declared beside it are declared, and the refusal is thrown', async () => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      await guard.close();
      const db: Kysely<unknown> = loggedKysely(target, url, []);
      const dialect = DIALECTS[target.name] as Dialect<never>;
      try {
        const store = createScheduleStore(db, dialect, resolveTableNames(prefix, dialect));
        // NOT NULL everywhere; on PostgreSQL and MySQL also a value too long for varchar(255).
        const refused = [schedule('b-null', null as unknown as string)];
        if (target.name !== 'sqlite') refused.push(schedule('d-long', LONG_EXPRESSION));
        await expect(store.declare([schedule('a', '* * * * *'), ...refused, schedule('c', '0 * * * *')], 'replica-1')).rejects.toThrow();
        expect((await store.list()).map(({ name, expression }) => [name, expression])).toEqual([
          ['a', '* * * * *'],
          ['c', '0 * * * *'],
        ]);
      } finally {
        await db.destroy();
      }
    });
  });
});
