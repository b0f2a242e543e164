// The decorators as an app compiles them: each fixture under test/fixtures/decorators/<mode> is
// compiled by tsc with its own tsconfig.json (standard decorators, or experimentalDecorators), imports
// 'cronguard' through the package's self-reference (dist/), and runs under plain node.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, describeResult, repoRoot, runProcess, type ProcessResult } from './support/run-process.js';

const tsc = join(repoRoot, 'node_modules', '.bin', 'tsc');
const sqliteDir = mkdtempSync(join(tmpdir(), 'cronguard-decorators-'));
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }));

function decorationError(job: string): object {
  return {
    classDefined: false,
    error: {
      constructorName: 'TypeError',
      isTypeError: true,
      isGuardError: false,
      code: null,
      job: null,
      message: `Expected \`lockAtMostFor\` of job "${job}" to be a duration like '5m' or 'PT5M', got "5 minutes"`,
    },
  };
}

const modes = [
  { mode: 'standard', decoratorArguments: 2, helper: '__esDecorate', otherHelper: '__decorate(' },
  { mode: 'legacy', decoratorArguments: 3, helper: '__decorate(', otherHelper: '__esDecorate' },
] as const;

describe.each(modes)('$mode decorators, compiled by tsc and run by plain node', ({ mode, decoratorArguments, helper, otherHelper }) => {
  const dir = join(repoRoot, 'test', 'fixtures', 'decorators', mode);
  const compiled = join(dir, 'out', 'jobs.js');
  let tscResult: ProcessResult;
  let nodeResult: ProcessResult | undefined;
  let report: Record<string, unknown> | undefined;
  let orderResult: ProcessResult | undefined;

  beforeAll(async () => {
    assertBuilt();
    rmSync(join(dir, 'out'), { recursive: true, force: true });
    tscResult = await runProcess(tsc, ['-p', join(dir, 'tsconfig.json')], repoRoot, 170_000);
    if (tscResult.code !== 0) return;
    nodeResult = await runProcess(process.execPath, [compiled, join(sqliteDir, `${mode}.sqlite`)], repoRoot);
    if (nodeResult.code === 0) report = JSON.parse(nodeResult.stdout) as Record<string, unknown>;
    orderResult = await runProcess(process.execPath, [join(dir, 'out', 'order.js'), join(sqliteDir, `${mode}-order.sqlite`)], repoRoot);
  }, 180_000);

  /** The report, or a failure that shows what the fixture printed. */
  function theReport(): Record<string, unknown> {
    expect(tscResult.code, describeResult('tsc', tscResult)).toBe(0);
    expect(nodeResult?.code, nodeResult && describeResult('node out/jobs.js', nodeResult)).toBe(0);
    expect(report).toBeDefined();
    return report as Record<string, unknown>;
  }

  it('compiles with tsc (exit 0, no diagnostics)', () => {
    expect(tscResult.code, describeResult('tsc', tscResult)).toBe(0);
    expect(tscResult.stdout + tscResult.stderr).toBe('');
  });

  it(`emits ${mode} decorator code`, () => {
    expect(tscResult.code, describeResult('tsc', tscResult)).toBe(0);
    const js = readFileSync(compiled, 'utf8');
    expect(js).toContain(helper);
    expect(js).not.toContain(otherHelper);
    expect(js).toMatch(/from 'cronguard'/);
  });

  it('runs under plain node: exit 0, nothing on stderr, one JSON line on stdout', () => {
    theReport();
    expect(nodeResult?.stderr).toBe('');
    expect(nodeResult?.stdout.trim().split('\n')).toHaveLength(1);
  });

  it('reports every field the test checks, and no other', () => {
    const keys = ['mode', 'decoratorArgumentCounts', 'compute', 'cleanup', 'context', 'methodNames', 'standalone', 'badOptions', 'logged'];
    expect(Object.keys(theReport()).sort()).toEqual(keys.sort());
  });

  it(`was decorated in ${mode} mode`, () => {
    const r = theReport();
    expect(r['mode']).toBe(mode);
    expect(r['decoratorArgumentCounts']).toEqual([decoratorArguments]);
  });

  it('returns the value computed from `this` and the arguments, then skips while lockAtLeastFor holds the lock', () => {
    expect(theReport()['compute']).toEqual({
      first: { type: 'number', value: 10 * 3 + 4 },
      second: { type: 'undefined', value: null },
      runs: 1,
      sameNameRun: { executed: false, reason: 'locked' },
    });
  });

  it('runs a Promise<void> method on every call when nothing holds its lock', () => {
    expect(theReport()['cleanup']).toEqual({
      results: [
        { type: 'undefined', value: null },
        { type: 'undefined', value: null },
      ],
      runs: 2,
    });
  });

  it('gives a decorated method its context through currentExecution(); assertLocked() throws outside', () => {
    expect(theReport()['context']).toEqual({
      inside: { type: 'string', value: 'reports.context reports.context false' },
      outsideCurrent: true,
      outsideAssert: 'NOT_LOCKED',
    });
  });

  it('keeps the method names', () => {
    expect(theReport()['methodNames']).toEqual(['compute', 'cleanup', 'greet']);
  });

  it('standalone guarded(): NO_DEFAULT_GUARD before setDefaultGuard, runs after', () => {
    expect(theReport()['standalone']).toEqual({
      beforeDefault: {
        rejected: {
          constructorName: 'GuardError',
          isTypeError: false,
          isGuardError: true,
          code: 'NO_DEFAULT_GUARD',
          job: 'greeter.greet',
          message:
            'Job "greeter.greet" was called before a default guard was set: call setDefaultGuard(createGuard({ … })) ' +
            'at start-up, or decorate with guard.guarded(…) instead',
        },
      },
      runsBeforeDefault: 0,
      afterDefault: { type: 'string', value: 'hello, world' },
      runs: 1,
    });
  });

  it('throws a TypeError when a class with bad options is defined', () => {
    expect(theReport()['badOptions']).toEqual({
      guardGuarded: decorationError('reports.bad'),
      standalone: decorationError('greeter.bad'),
    });
  });

  it('warns once per decorated job that has neither `cron` nor lockAtLeastFor (guard.guarded when applied, guarded() at its first call)', () => {
    const logged = theReport()['logged'] as string[];
    expect(logged.map((line) => /^warn: Job "([^"]+)" is decorated without `cron` and with lockAtLeastFor 0: /.exec(line)?.[1])).toEqual([
      'reports.cleanup',
      'reports.context',
      'greeter.greet',
    ]);
    expect(logged[0]).toContain(
      "Set `cron` to the expression the scheduler fires it on (in NestJS, use @GuardedCron from 'cronguard/nestjs')",
    );
  });

  describe('decorator order: @guarded above or below other decorators (real @nestjs/schedule, reflect-metadata)', () => {
    function orderReport(): Record<string, unknown> {
      expect(tscResult.code, describeResult('tsc', tscResult)).toBe(0);
      expect(orderResult?.code, orderResult && describeResult('node out/order.js', orderResult)).toBe(0);
      expect(orderResult?.stderr).toBe('');
      return JSON.parse(orderResult?.stdout ?? '') as Record<string, unknown>;
    }

    it('Nest schedules @Cron and @Interval methods in both orders', () => {
      const r = orderReport();
      expect(r['mode']).toBe(mode);
      expect(r['cronJobs']).toEqual(['cron-above-guarded', 'guarded-above-cron']);
      expect(r['intervals']).toEqual(['guarded-above-interval', 'interval-above-guarded']);
    });

    it("keeps other decorators' reflect-metadata metadata (symbol and string keys) and own properties in both orders", () => {
      expect(orderReport()['own']).toEqual({
        guardedAboveOwn: { tag: 'below', stringKey: 'below!', mark: 'below' },
        ownAboveGuarded: { tag: 'above', stringKey: 'above!', mark: 'above' },
      });
    });

    it("keeps the method's name and length", () => {
      expect(orderReport()['nameAndLength']).toEqual([
        ['guardedAboveCron', 2],
        ['cronAboveGuarded', 1],
        ['guardedAboveOwn', 3],
        ['ownAboveGuarded', 1],
      ]);
    });

    it('the method Nest found is the guarded one: each call ran under its lock row', () => {
      const r = orderReport();
      expect(r['calls']).toEqual({ guardedAboveCron: 5, cronAboveGuarded: 7, guardedAboveOwn: 'abc' });
      expect(r['locks']).toEqual(['order.cron-above-guarded', 'order.guarded-above-cron', 'order.guarded-above-own']);
    });

    if (mode === 'legacy') {
      it('leaves emitDecoratorMetadata type metadata (on the prototype) as it was', () => {
        expect(orderReport()['designParamTypes']).toEqual(['Number', 'Number']);
      });
    }
  });

  it('rejects at compile time a guarded method that is not async, or whose Promise cannot hold undefined', () => {
    // tsc compiled type-errors.ts with no diagnostics: each of its @ts-expect-error lines was an
    // error (an unused one fails the compile). Counted, so that none goes missing unnoticed: two
    // sync methods and two Promise<T> methods, in the fixture and in jobs.ts.
    expect(tscResult.code, describeResult('tsc', tscResult)).toBe(0);
    const expectedErrors = (file: string): number =>
      readFileSync(join(dir, file), 'utf8').match(/^\s*\/\/ @ts-expect-error /gm)?.length ?? 0;
    expect(expectedErrors('type-errors.ts')).toBe(4);
    expect(expectedErrors('jobs.ts')).toBe(2);
  });
});
