import type { JobFunction } from './execute.js';
import type { JobOptions, ResolvedJob } from './job-options.js';
import { UNSCHEDULED } from './run-request.js';
import type { RunResult } from './run-result.js';
import type { ResolvedJobRunner } from './runner.js';

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
