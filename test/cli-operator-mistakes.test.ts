// What a new operator hits on the `cronguard` command (issue #26): a mistyped job name that acted, an
// unlock with no trail, a job that could not be forgotten, and messages that did not say what to do.
// Through its command line, on every dialect.
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { describe, expect, it } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { cronguard } from './support/cronguard-cli.js';

describe('cronguard operator commands', () => {
  eachDialectAtOnce('refuses a mistyped job name with the nearest ones, creates nothing, and forgets a job', async ({ target, expect }) => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const { guard } = guardOn(url, prefix);
    await guard.migrate();
    await guard.run({ name: 'tick.every-second', lockAtMostFor: '1m' }, () => 1);
    const common = ['--database', url, '--table-prefix', prefix];

    for (const args of [
      ['pause', 'tick.every-secnd', '--until', '10m'],
      ['trigger', 'tick.every-secnd'],
      ['resume', 'tick.every-secnd'],
    ]) {
      const typo = await cronguard([...args, ...common]);
      expect(typo.code).toBe(2);
      expect(typo.stderr).toContain('no job named "tick.every-secnd" has run or is scheduled. Did you mean "tick.every-second"?');
    }
    expect((await cronguard(['pause', 'tick.every-secnd', ...common])).stderr).toContain('--create pauses a job that has not run yet');
    // Nothing was written for the typo.
    expect((await guard.locks()).map((lock) => lock.name)).toEqual(['tick.every-second']);

    // --create pauses a job before its first run; forget deletes its row again, and the audit has both.
    expect((await cronguard(['pause', 'report.new', '--create', '--by', 'alice', ...common])).code).toBe(0);
    expect((await guard.locks()).map((lock) => lock.name)).toEqual(['report.new', 'tick.every-second']);
    const forgot = await cronguard(['forget', 'report.new', '--by', 'alice', '--reason', 'typo', ...common]);
    expect(forgot).toMatchObject({ code: 0, stderr: '' });
    expect(forgot.stdout).toContain('Forgot "report.new"');
    expect((await guard.locks()).map((lock) => lock.name)).toEqual(['tick.every-second']);
    expect((await guard.controls('report.new')).map((entry) => [entry.action, entry.by])).toEqual([
      ['forget', 'alice'],
      ['pause', 'alice'],
    ]);
    expect((await cronguard(['forget', 'report.new', ...common])).code).toBe(2);
  });

  eachDialectAtOnce('audits an unlock (who, whose lock, which run) and refuses to forget a held job', async ({ target, expect }) => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const { guard } = guardOn(url, prefix, { lockedBy: 'replica-7' });
    await guard.migrate();
    let release: () => void = () => undefined;
    const holding = guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => new Promise<void>((resolve) => (release = resolve)));
    await expect.poll(async () => (await guard.locks())[0]?.state).toBe('held');
    const common = ['--database', url, '--table-prefix', prefix];
    const refused = await cronguard(['forget', 'nightly', ...common]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('holds its lock now');

    const unlocked = await cronguard(['unlock', 'nightly', '--force', '--by', 'bob', '--reason', 'host died', ...common]);
    expect(unlocked).toMatchObject({ code: 0, stderr: '' });
    const audit = await cronguard(['audit', 'nightly', ...common]);
    expect(audit.stdout).toMatch(/unlock\s+bob\s+.*host died \(freed the lock of replica-7/);
    const [entry] = await guard.controls('nightly');
    const [run] = (await guard.history({ job: 'nightly' })).runs;
    expect(entry?.reason).toBe(`host died (freed the lock of replica-7, run ${run?.id ?? '?'})`);
    release();
    await holding;
    // A typo for unlock is a failure for a script, with the nearest names.
    const missed = await cronguard(['unlock', 'nightli', '--force', ...common]);
    expect(missed.code).toBe(1);
    expect(missed.stdout).toContain('Did you mean "nightly"?');
  });

  eachDialectAtOnce('says to migrate when pausing on tables that do not exist', async ({ target, expect }) => {
    const url = databaseUrl(target);
    // The database exists (a SQLite file too), the tables of this prefix do not.
    await guardOn(url, uniquePrefix()).guard.migrate();
    const result = await cronguard(['pause', 'x', '--database', url, '--table-prefix', uniquePrefix()]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('run `cronguard migrate`');
  });
});

describe('cronguard messages', () => {
  it('suggests the nearest command and option, and points at --help', async () => {
    const command = await cronguard(['lock']);
    expect(command).toMatchObject({ code: 2, stdout: '' });
    expect(command.stderr).toBe('cronguard: unknown command "lock". Did you mean "locks" or "unlock"? See cronguard --help\n');
    const flag = await cronguard(['locks', '--jsn']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('unknown option --jsn. Did you mean --json');
    const wrongCommand = await cronguard(['locks', '--until', '2h', '--database', 'sqlite::memory:']);
    expect(wrongCommand.stderr).toContain('locks does not take --until (it takes no option of its own; see cronguard --help)');
  });

  it('says that migrate creates a SQLite file but not its directory', async () => {
    const result = await cronguard(['migrate', '--database', 'sqlite:/nonexistent/dir/x.db']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('no directory /nonexistent/dir for the SQLite database /nonexistent/dir/x.db: create it first');
  });
});
