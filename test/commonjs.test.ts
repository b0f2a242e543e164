// A CommonJS app loads the ESM-only package with require() (Node's require(esm), on by default from
// Node 20.19). The app is copied to a temp dir whose node_modules/cronguard links to the repo root, as
// an installed (or `npm link`ed) package would be: the fixture's own package.json ("type": "commonjs")
// would otherwise stop the package's self-reference.
import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, builtEntry, describeResult, repoRoot, runProcess, type ProcessResult } from './support/run-process.js';

const fixture = join(repoRoot, 'test', 'fixtures', 'commonjs-app');
const tempDir = mkdtempSync(join(tmpdir(), 'cronguard-commonjs-'));
afterAll(() => rmSync(tempDir, { recursive: true, force: true }));

describe('a CommonJS app', () => {
  let result: ProcessResult;

  beforeAll(async () => {
    assertBuilt();
    const app = join(tempDir, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    copyFileSync(join(fixture, 'app.cjs'), join(app, 'app.cjs'));
    copyFileSync(join(fixture, 'package.json'), join(app, 'package.json'));
    symlinkSync(repoRoot, join(app, 'node_modules', 'cronguard'), 'dir');
    result = await runProcess(process.execPath, ['app.cjs', join(tempDir, 'app.sqlite')], app);
  });

  function report(): Record<string, unknown> {
    expect(result.code, describeResult('node app.cjs', result)).toBe(0);
    return JSON.parse(result.stdout) as Record<string, unknown>;
  }

  it('exits 0', () => {
    expect(result.code, describeResult('node app.cjs', result)).toBe(0);
    expect(result.signal).toBeNull();
  });

  it('prints no ExperimentalWarning, nor anything else, on stderr', () => {
    expect(result.stderr).not.toMatch(/ExperimentalWarning/);
    expect(result.stderr).toBe('');
  });

  it('requires the built package, with every runtime export, as the same module instance import() gets', () => {
    const r = report();
    expect(realpathSync(r['resolved'] as string)).toBe(realpathSync(builtEntry));
    expect(r['exports']).toEqual([
      'Guard',
      'GuardError',
      'GuardErrorCodes',
      'assertLocked',
      'createGuard',
      'currentExecution',
      'guarded',
      'setDefaultGuard',
    ]);
    expect(r['sameModuleAsImport']).toBe(true);
  });

  it('runs a job on SQLite, then skips it while lockAtLeastFor holds the lock', () => {
    const r = report();
    expect(r['dialect']).toBe('sqlite');
    expect(r['first']).toEqual({ executed: true, value: { ran: 'cjs.report', signalAborted: false } });
    expect(r['second']).toEqual({ executed: false, reason: 'locked' });
    expect(r['logged']).toEqual([]);
  });

  it('rejects bad options with a TypeError', () => {
    expect(report()['badOptions']).toEqual({
      constructorName: 'TypeError',
      isGuardError: false,
      isTypeError: true,
      code: null,
      message: `Expected \`lockAtMostFor\` of job "cjs.bad" to be a duration like '5m' or 'PT5M', got "5 minutes"`,
    });
  });

  it('applies the standalone guarded() by hand: NO_DEFAULT_GUARD (a GuardError) first, then runs with `this`', () => {
    expect(report()['decorated']).toEqual({
      beforeDefault: {
        constructorName: 'GuardError',
        isGuardError: true,
        isTypeError: false,
        code: 'NO_DEFAULT_GUARD',
        message:
          'Job "billing.invoice" was called before a default guard was set: call setDefaultGuard(createGuard({ … })) ' +
          'at start-up, or decorate with guard.guarded(…) instead',
      },
      afterDefault: 50,
      runs: 1,
    });
  });

  it('reports every field the test checks, and no other', () => {
    expect(Object.keys(report()).sort()).toEqual(
      ['resolved', 'exports', 'sameModuleAsImport', 'dialect', 'first', 'second', 'badOptions', 'decorated', 'logged'].sort(),
    );
  });
});
