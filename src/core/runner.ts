import type { JobFunction } from './execute.js';
import type { JobOptions, ResolvedJob } from './job-options.js';
import type { RunResult } from './run-result.js';

/**
 * What the integrations (the decorators, `guard.schedule`, `@GuardedCron`) need to run a job whose
 * options were validated once, beforehand. The guard implements it; the integrations receive it and
 * never import the guard module. Not part of the package's API.
 */
export interface ResolvedJobRunner {
  resolveJob(options: JobOptions): ResolvedJob;
  /** `resolveJob` for a method decorator: warns once when the job has neither `cron` nor lockAtLeastFor. */
  resolveDecoratedJob(options: JobOptions): ResolvedJob;
  runResolved<T>(job: ResolvedJob, fn: JobFunction<T>, slot: Date | null): Promise<RunResult<Awaited<T>>>;
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
