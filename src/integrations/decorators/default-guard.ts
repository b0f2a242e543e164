import { GuardError } from '../../core/errors.js';
import type { JobOptions } from '../../core/job-options.js';
import { checkJobOptions } from '../../core/job-options.js';
import { lateBoundRunner, type RunnerHost } from '../../core/runner-host.js';
import { createGuardedDecorator, type GuardedDecorator } from './guarded.js';

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
