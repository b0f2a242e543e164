// The `cronguard` command, end to end through child_process, on the built package.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';

const bin = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));

async function cronguard(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, ...args], {
      env: { ...process.env, CRONGUARD_DATABASE_URL: '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe.each(dialectTargets())('cronguard migrate on $name', (target) => {
  it.skipIf(target.serverUrl === null)('creates the tables, from --database or CRONGUARD_DATABASE_URL', async () => {
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const first = await cronguard(['migrate', '--database', url, '--table-prefix', prefix]);
    expect(first).toEqual({ code: 0, stdout: 'cronguard: tables are up to date\n', stderr: '' });
    const again = await cronguard(['migrate', '--table-prefix', prefix], { CRONGUARD_DATABASE_URL: url });
    expect(again.code).toBe(0);
    const { guard } = guardOn(url, prefix);
    expect((await guard.run({ name: 'after-cli', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
  });
});

describe('cronguard usage errors', () => {
  it('exits 2 with one line and no stack trace', async () => {
    const cases = [
      { args: ['migrate'], message: 'cronguard: no database: pass --database <url> or set CRONGUARD_DATABASE_URL\n' },
      { args: ['migrate', '--database', 'foo://x'], message: /^cronguard: Expected `database` to be a URL starting with/ },
      { args: ['frobnicate', '--database', 'sqlite::memory:'], message: 'cronguard: unknown command "frobnicate"\n' },
      { args: ['migrate', '--nope'], message: /^cronguard: Unknown option '--nope'/ },
      { args: ['migrate', '--database', 'postgres://postgres@127.0.0.1:1/none'], message: /^cronguard: Migrating the cronguard tables failed/ },
    ];
    for (const { args, message } of cases) {
      const result = await cronguard(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr, args.join(' ')).toMatch(message);
    }
  });

  it('prints help with exit 0', async () => {
    const result = await cronguard(['--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Usage: cronguard <command>/);
  });
});
