// The `cronguard` command's own output and usage errors: escapes for hostile text, one line per
// refusal, help and version (test/cli.test.ts reads the tables). Its command line runs in this
// process; the built bin runs as a child process for what the process adds: its exit code and
// streams.
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { cronguard, cronguardProcess } from './support/cronguard-cli.js';

describe('the cronguard bin', () => {
  it('sets the exit code and writes to its own stdout and stderr: help, a usage error, a database command', async () => {
    const url = databaseUrl({ name: 'sqlite', serverUrl: 'sqlite:' });
    const common = ['--database', url, '--table-prefix', uniquePrefix()];
    const [help, usage, migrated] = await Promise.all([
      cronguardProcess(['--help']),
      cronguardProcess(['migrate']),
      cronguardProcess(['migrate', ...common]),
    ]);
    expect(help).toMatchObject({ code: 0, stdout: expect.stringMatching(/^Usage: cronguard <command>/), stderr: '' });
    expect(usage).toEqual({
      code: 2,
      stdout: '',
      stderr: 'cronguard: no database: pass --database <url>, or set CRONGUARD_DATABASE_URL or DATABASE_URL\n',
    });
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    // The same command line in this process answers as the bin did.
    expect(await cronguard(['locks', '--json', ...common])).toEqual(await cronguardProcess(['locks', '--json', ...common]));
    expect(await cronguard(['migrate'])).toEqual(usage);
  });
});

describe('cronguard output', () => {
  it('writes control characters in job names and errors as escapes, never raw to the terminal', async () => {
    const target = { name: 'sqlite' as const, serverUrl: 'sqlite:' };
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const { guard } = guardOn(url, prefix);
    await guard.migrate();
    const name = 'evil\nname\u001b[31m';
    await expect(guard.run({ name, lockAtMostFor: '1m' }, () => Promise.reject(new Error('boom\u001b[2J\u0007')))).rejects.toThrow();
    const common = ['--database', url, '--table-prefix', prefix];
    for (const command of ['locks', 'history']) {
      const { code, stdout } = await cronguard([command, ...common]);
      expect(code, command).toBe(0);
      // eslint-disable-next-line no-control-regex -- what must not be printed
      expect(stdout, command).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f]/);
      expect(stdout.trimEnd().split('\n'), command).toHaveLength(2);
      expect(stdout, command).toContain('evil\\x0aname\\x1b[31m');
    }
  });
});

describe('cronguard usage errors', () => {
  it('exits 2 with one line and no stack trace', async () => {
    // A mistyped SQLite path in a directory that exists: a read must not create the file.
    const typo = join(tmpdir(), `cronguard-typo-${process.pid}.sqlite`);
    const cases = [
      {
        args: ['migrate'],
        message: 'cronguard: no database: pass --database <url>, or set CRONGUARD_DATABASE_URL or DATABASE_URL\n',
      },
      {
        args: ['migrate', '--database', 'foo://x'],
        message: /^cronguard: Expected --database to be a URL starting with/,
      },
      // An unescaped '#' in a password: refused before connecting, the password masked.
      {
        args: ['migrate', '--database', 'postgres://admin:p@ss#w0rd@db/app'],
        message: /^cronguard: Expected --database to be a URL that can be parsed, got "postgres:\/\/admin:\*\*\*@db\/app": percent-encode/,
      },
      // The password of a mistyped URL stays out of the message.
      {
        args: ['migrate', '--database', 'postgress://admin:hunter2@db/app'],
        message: /got "postgress:\/\/admin:\*\*\*@db\/app"\n$/,
      },
      {
        args: ['migrate', '--database', 'jdbc:postgresql://admin:p@ss/w0rd@db/app'],
        message: /got "jdbc:postgresql:\/\/admin:\*\*\*@db\/app"\n$/,
      },
      {
        args: ['frobnicate', '--database', 'sqlite::memory:'],
        message: 'cronguard: unknown command "frobnicate". See cronguard --help\n',
      },
      {
        args: ['locks', '--job', 'x', '--database', 'sqlite::memory:'],
        message: 'cronguard: locks does not take --job (it takes no option of its own; see cronguard --help)\n',
      },
      {
        args: ['locks', '--database', 'sqlite::memory:'],
        message: /^cronguard: The cronguard tables do not exist; run `cronguard migrate`/,
      },
      {
        args: ['history', '--limit', 'x', '--database', 'sqlite::memory:'],
        message: 'cronguard: --limit expects a whole number, got "x"\n',
      },
      { args: ['prune', '--database', 'sqlite::memory:'], message: /^cronguard: prune needs --older-than/ },
      { args: ['unlock', '--database', 'sqlite::memory:'], message: /^cronguard: unlock needs a job name/ },
      {
        args: ['locks', '--database', `sqlite:${typo}`],
        message: `cronguard: no SQLite database at ${typo} (cronguard migrate creates it)\n`,
      },
      { args: ['locks', '--database', 'mysql://root@127.0.0.1:1/none'], message: /^cronguard: .*ECONNREFUSED/ },
      { args: ['migrate', '--nope'], message: /^cronguard: unknown option --nope\..* See cronguard --help$/m },
      {
        args: ['migrate', '--database', 'postgres://postgres@127.0.0.1:1/none'],
        message: /^cronguard: Migrating the cronguard tables failed: .*ECONNREFUSED/,
      },
      // localhost is ::1 and 127.0.0.1: Node refuses both in an AggregateError with an empty message.
      {
        args: ['migrate', '--database', 'postgres://postgres@localhost:1/none'],
        message: /^cronguard: Migrating the cronguard tables failed: .*ECONNREFUSED/,
      },
    ];
    // The commands run side by side (nothing shared): the checks, in order, after.
    const results = await Promise.all(cases.map(({ args }) => cronguard(args)));
    for (const [index, { args, message }] of cases.entries()) {
      const result = results[index] as Awaited<ReturnType<typeof cronguard>>;
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr, args.join(' ')).toMatch(message);
    }
    expect(existsSync(typo)).toBe(false);
  });

  it('names the flag or variable a bad option came from, not the API option', async () => {
    const memory = ['--database', 'sqlite::memory:'];
    const cases = [
      {
        args: ['prune', '--older-than', '5 minutes', ...memory],
        message: `Expected --older-than to be a duration like '5m' or 'PT5M', got "5 minutes"`,
      },
      {
        args: ['history', '--since', '5x', ...memory],
        message: `Expected --since to be a duration like '5m' or 'PT5M', got "5x"`,
      },
      {
        args: ['history', '--status', 'bogus', ...memory],
        message: 'Expected --status to be one of running, succeeded, failed, cancelled, abandoned, skipped, got "bogus"',
      },
      {
        args: ['history', '--limit', '0', ...memory],
        message: 'Expected --limit to be an integer from 1 to 1000, got 0',
      },
      {
        args: ['history', '--job', '', ...memory],
        message: 'Expected --job to be a string of 1 to 255 characters without NUL, got ""',
      },
      {
        args: ['history', '--before', 'nope', ...memory],
        message: 'Expected --before to be the `next` cursor of a history page, got "nope"',
      },
      {
        args: ['unlock', 'j'.repeat(256), '--force', ...memory],
        message: `Expected the job name to be a string of 1 to 255 characters without NUL, got "${'j'.repeat(256)}"`,
      },
      {
        args: ['migrate', '--table-prefix', 'bad-prefix', ...memory],
        message:
          'Expected --table-prefix to be an identifier like \'cronguard_\' (schema-qualified prefixes are PostgreSQL only) of at most 40 characters, got "bad-prefix"',
      },
      {
        args: ['locks', '--database', 'foo://x'],
        message: 'Expected --database to be a URL starting with postgres://, postgresql://, mysql://, mariadb:// or sqlite:, got "foo://x"',
      },
    ];
    const results = await Promise.all(cases.map(({ args }) => cronguard(args)));
    for (const [index, { args, message }] of cases.entries()) {
      expect(results[index], args.join(' ')).toEqual({ code: 2, stdout: '', stderr: `cronguard: ${message}\n` });
    }
    expect(await cronguard(['locks'], { DATABASE_URL: 'foo://x' })).toMatchObject({
      code: 2,
      stderr:
        'cronguard: Expected $DATABASE_URL to be a URL starting with postgres://, postgresql://, mysql://, mariadb:// or sqlite:, got "foo://x"\n',
    });
  });

  it('explains a flag value that looks like a flag in its own words, and keeps a newline in data escaped', async () => {
    // node's parseArgs explains an ambiguous option value in three lines of its own ('--database=-XYZ').
    const result = await cronguard(['migrate', '--database', '--json']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'cronguard: --database needs a value, and the next argument looks like a flag: write --database=<value> for a value that starts with "-" (see cronguard --help)\n',
    );
    // A newline in data (a job name) stays an escape: one line.
    expect(await cronguard(['unlock', 'a\nb', '--database', 'sqlite::memory:'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'cronguard: refusing to unlock "a\\x0ab" without --force: if its holder is still running, the next run will overlap it\n',
    });
  });

  it('prints help with exit 0, for --help, -h and help', async () => {
    const commands = [['--help'], ['-h'], ['help'], ['locks', '--help']];
    const results = await Promise.all(commands.map((args) => cronguard(args)));
    for (const [index, args] of commands.entries()) {
      const result = results[index] as Awaited<ReturnType<typeof cronguard>>;
      expect(result.code, args.join(' ')).toBe(0);
      expect(result.stdout, args.join(' ')).toMatch(/^Usage: cronguard <command>/);
      expect(result.stdout, args.join(' ')).toMatch(/ help +Show this help/);
    }
  });

  it("prints the package's version with --version, read from package.json next to dist/", async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(await cronguard(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});
