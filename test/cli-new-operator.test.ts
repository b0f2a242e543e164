// The messages a new operator met (issue #35, item 7), through the `cronguard` command line: an
// unknown flag in our words with the nearest one, a mistyped command, the migrate hint from the
// controls on tables not migrated, a refused trigger that names --force, a SQLite path whose
// directory is missing, and a `slots` table whose columns add up. Cron expressions node-cron
// accepted silently (`*/61`) or refused in its own words are refused in ours.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { cronguard } from './support/cronguard-cli.js';

describe('cronguard command-line mistakes', () => {
  it('answers an unknown flag and a mistyped command in its own words, with the nearest name and --help', async () => {
    const flag = await cronguard(['slots', '--snce', '1h', '--database', 'sqlite::memory:']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toBe('cronguard: unknown option --snce. Did you mean --since? See cronguard --help\n');
    // Not node:util's parser text ("To specify a positional argument starting with a '-' …").
    const short = await cronguard(['locks', '-x']);
    expect(short).toMatchObject({ code: 2, stderr: 'cronguard: unknown option -x. See cronguard --help\n' });
    const valued = await cronguard(['locks', '--json=yes']);
    expect(valued).toMatchObject({ code: 2, stderr: 'cronguard: --json takes no value (see cronguard --help)\n' });
    const dashed = await cronguard(['history', '--limit', '-5']);
    expect(dashed.code).toBe(2);
    expect(dashed.stderr).toContain('--limit needs a value');
    expect(dashed.stderr).toContain('write --limit=<value>');
    expect(dashed.stderr).not.toContain('XYZ');

    const command = await cronguard(['lock', '--database', 'sqlite::memory:']);
    expect(command.code).toBe(2);
    expect(command.stderr).toMatch(/^cronguard: unknown command "lock"\. Did you mean "locks"/);
    expect(command.stderr).toContain('See cronguard --help');
  });

  it('says a SQLite directory is missing rather than that migrate creates the file', async () => {
    for (const command of ['locks', 'migrate']) {
      const result = await cronguard([command, '--database', 'sqlite:/nonexistent/dir/x.db']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('no directory /nonexistent/dir for the SQLite database /nonexistent/dir/x.db: create it first');
      expect(result.stderr).not.toContain('(cronguard migrate creates it)');
    }
  });

  it('refuses cron expressions out of range, or with a step that never repeats, in its own words', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cronguard-cron-'));
    const guard = createGuard({ database: `sqlite:${join(dir, 'cron.db')}` });
    try {
      const schedule = (expression: string) => () => guard.schedule(expression, { name: 'report', lockAtMostFor: '1m' }, () => 1);
      expect(schedule('*/61 * * * * *')).toThrow(
        new TypeError(
          `Expected the schedule of job "report" to be a cron expression like '0 * * * *' or '*/10 * * * * *', got "*/61 * * * * *": ` +
            `the step 61 of "*/61" in the second field must be from 1 to 60 (a larger one fires only at its first value)`,
        ),
      );
      expect(schedule('0 25 * * *')).toThrow(/got "0 25 \* \* \*": 25 is outside the hour field's 0-23$/);
      expect(schedule('0 0 31 2 *')).toThrow(/the day of month "31" never comes in the month "2"$/);
      expect(schedule('* * * * * * *')).toThrow(/it has 7 fields; a cron expression has 5/);
      expect(schedule('0 0 * * 8')).toThrow(/got "0 0 \* \* 8": 8 is outside the weekday field's 0-7$/);
      await expect(guard.run({ name: 'report', lockAtMostFor: '1m', cron: '5-70 * * * *' }, () => 1)).rejects.toThrow(
        /^Expected `cron` of job "report" to be a cron expression like .*: 70 is outside the minute field's 0-59$/,
      );
      // What node-cron reads as meant still passes: names, wrapping ranges, L, W, #, ?, nicknames.
      for (const expression of ['0 0 * * mon-fri', '0 22-2 * * *', '0 0 L * *', '0 0 15W * *', '0 0 * * 1#2', '0 0 ? * *', '@hourly']) {
        guard.schedule(expression, { name: `ok ${expression}`, lockAtMostFor: '1m' }, () => 1).destroy();
      }
    } finally {
      await guard.close();
    }
  });
});

describe('cronguard controls and slots', () => {
  eachDialectAtOnce('gives the migrate hint from every control on tables not migrated', async ({ target, expect }) => {
    const url = databaseUrl(target);
    // SQLite: an empty file (a missing one is refused before any table is read).
    if (target.name === 'sqlite') await writeFile(url.slice('sqlite:'.length), '');
    // A prefix no table has: the database is reachable, the tables are not there.
    const common = ['--database', url, '--table-prefix', uniquePrefix()];
    for (const args of [
      ['pause', 'nightly', '--create'],
      ['resume', 'nightly'],
      ['trigger', 'nightly', '--force'],
      ['audit', 'nightly'],
    ]) {
      const result = await cronguard([...args, ...common]);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toContain('The cronguard tables do not exist; run `cronguard migrate`');
    }
  });

  eachDialectAtOnce(
    'names --force when a trigger is refused, and lists paused slots in a slots table that adds up',
    async ({ target, expect }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      const common = ['--database', url, '--table-prefix', prefix];
      // Every second, paused for its third slot on: slots that ran, then paused ones.
      let runs = 0;
      const task = guard.schedule('* * * * * *', { name: 'tick', lockAtMostFor: '10s' }, () => void (runs += 1));
      await expect.poll(() => runs, { timeout: 30_000, interval: 100 }).toBeGreaterThanOrEqual(2);
      expect((await cronguard(['pause', 'tick', '--by', 'alice', ...common])).code).toBe(0);
      const refused = await cronguard(['trigger', 'tick', ...common]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(
        '"tick" is paused, so it was not triggered: resume it first (cronguard resume tick), or run it anyway with cronguard trigger tick --force',
      );
      await expect
        .poll(async () => (await guard.slots({ job: 'tick', since: '5m' }))[0]?.counts.paused ?? 0, { timeout: 30_000, interval: 250 })
        .toBeGreaterThanOrEqual(2);
      task.stop();

      const listed = await cronguard(['slots', '--job', 'tick', '--since', '5m', ...common]);
      const [header, row] = listed.stdout.split('\n');
      const columns = (header ?? '')
        .trim()
        .toLowerCase()
        .split(/\s{2,}/);
      expect(columns).toEqual([
        'job',
        'schedule',
        'slots',
        'succeeded',
        'late',
        'missed',
        'overlapped',
        'paused',
        'failed',
        'cancelled',
        'running',
        'since',
        'until',
      ]);
      const cells = (row ?? '').trim().split(/\s{2,}/);
      const count = (column: string): number => Number(cells[columns.indexOf(column)]);
      const outcomes = ['succeeded', 'late', 'missed', 'overlapped', 'paused', 'failed', 'cancelled', 'running'];
      expect(count('paused')).toBeGreaterThanOrEqual(2);
      // The outcome columns add up to the slots.
      expect(outcomes.reduce((sum, column) => sum + count(column), 0)).toBe(count('slots'));
    },
  );
});
