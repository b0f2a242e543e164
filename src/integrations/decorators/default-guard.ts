import { GuardError } from '../../core/errors.js';
import { type JobOptions, checkJobOptions, type ResolvedJob } from '../../core/job-options.js';
import { createGuardedDecorator, type GuardedDecorator } from './guarded.js';
import type { JobFunction } from '../../core/execute.js';
import { UNSCHEDULED } from '../../core/run-request.js';
import type { RunResult } from '../../core/run-result.js';
import type { ResolvedJobRunner } from '../../core/runner.js';

let defaultGuard: RunnerHost | undefined;

/**
 * Sets the guard (what `createGuard` returns) that the standalone `guarded()` decorator uses;
 * `undefined` unsets it.
 */
export function setDefaultGuard(guard: RunnerHost | undefined): void {
  defaultGuard = guard;
}

/**
 * `guard.guarded(options)` for modules that declare jobs before the database is configured: the
 * guard set by `setDefaultGuard` is looked up at each call. The options are checked when the
 * decorator is applied; the guard's defaults fill the gaps at the call.
 * @example
 * import { createGuard, guarded, setDefaultGuard } from 'cronguard';
 *
 * class Jobs {
 *   \@guarded({ name: 'nightly-report', lockAtMostFor: '10m' }) // `\@` in JSDoc, `@` in code
 *   async nightlyReport(): Promise<void> { await buildReport(); }
 * }
 * // At start-up, once the database is configured:
 * setDefaultGuard(createGuard({ database: process.env.DATABASE_URL }));
 */
export function guarded(options: JobOptions): GuardedDecorator {
  checkJobOptions(options);
  return createGuardedDecorator(
    lateBoundRunner(
      options,
      () => defaultGuard,
      () =>
        new GuardError(
          'NO_DEFAULT_GUARD',
          `Job "${options.name}" was called before a default guard was set: call setDefaultGuard(createGuard({ … })) ` +
            'at start-up, or decorate with guard.guarded(…) instead',
          { job: options.name },
        ),
    ),
  );
}

/**
 * The key under which a guard hands its runner to the integrations. Not exported from the package:
 * only this package's modules reach a guard's runner.
 */
export const RUNNER: unique symbol = Symbol('cronguard.runner');

/** A guard as the integrations see it: something that has a runner. `Guard` is the one implementation. */
export interface RunnerHost {
  /** @internal */
  readonly [RUNNER]: ResolvedJobRunner;
}

/**
 * How a decorator declared before its guard exists runs: the guard is looked up at each call
 * (`hostOf`, undefined before one is set), the job's options are resolved against that guard's
 * defaults once per guard, and the call runs without a slot of its own (a `cron` option claims one).
 */
export function lateBoundRunner(
  options: JobOptions,
  hostOf: () => RunnerHost | undefined,
  noHost: () => Error,
): (fn: JobFunction<unknown>) => Promise<RunResult<unknown>> {
  const resolved = new WeakMap<RunnerHost, ResolvedJob>();
  return async (fn) => {
    const host = hostOf();
    if (host === undefined) throw noHost();
    const runner = host[RUNNER];
    let job = resolved.get(host);
    if (job === undefined) {
      job = runner.resolveDecoratedJob(options);
      resolved.set(host, job);
    }
    return runner.runResolved(job, fn, UNSCHEDULED);
  };
}
