import { Cron } from '@nestjs/schedule';
import { lateBoundRunner } from '../core/runner-host.js';
import { GuardError } from '../core/errors.js';
import { checkJobOptions, type JobOptions } from '../core/job-options.js';
import { createGuardedDecorator } from '../integrations/decorators/guarded.js';
import { markGuardedCron } from './guarded-cron-triggers.js';
import { currentModuleGuard } from './module-guard.js';

/** Options of `@GuardedCron`: the job's, less `cron` and `timezone`, which come from the expression and `timeZone`. */
export interface GuardedCronOptions extends Omit<JobOptions, 'cron' | 'timezone'> {
  /**
   * The IANA time zone the expression is read in, by `@nestjs/schedule` and by the guard alike
   * (Nest's spelling). @default the process's time zone
   */
  timeZone?: string;
  /** Registers the job as disabled in Nest's SchedulerRegistry (start it by hand). @default false */
  disabled?: boolean;
}

/**
 * Schedules the method with `@nestjs/schedule` (`@Cron(expression)`, named after the job in Nest's
 * SchedulerRegistry) and guards each fire with the job's lock and its slot (the `cron` option set
 * from the same expression): one run per fire across replicas, in whatever order other decorators
 * are written. The guard is the one `CronguardModule` provides, looked up at each fire; while the
 * app runs, the method answers the job's "run now" requests (`guard.trigger`). For
 * `experimentalDecorators`, as NestJS compiles. Options are checked now: a `TypeError` when wrong.
 */
export function GuardedCron(expression: string, options: GuardedCronOptions): MethodDecorator {
  const { timeZone, disabled, ...job } = options;
  const jobOptions: JobOptions = {
    ...job,
    cron: expression,
    ...(timeZone === undefined ? {} : { timezone: timeZone }),
  };
  checkJobOptions(jobOptions);
  const guard = createGuardedDecorator(
    lateBoundRunner(
      jobOptions,
      currentModuleGuard,
      () =>
        new GuardError(
          'NO_DEFAULT_GUARD',
          `Job "${jobOptions.name}" was called before CronguardModule created its guard: import ` +
            'CronguardModule.forRoot(…) or forRootAsync(…) in your application module',
          { job: jobOptions.name },
        ),
    ),
  );
  const schedule = Cron(expression, {
    name: jobOptions.name,
    ...(timeZone === undefined ? {} : { timeZone }),
    ...(disabled === undefined ? {} : { disabled }),
  });
  return (target, propertyKey, descriptor) => {
    const method: unknown = descriptor.value;
    // Guard first, so that Nest's metadata lands on the function it will call: the wrapper.
    (guard as (target: object, key: string | symbol, descriptor: PropertyDescriptor) => void)(target, propertyKey, descriptor);
    // CronguardModule finds it there, to answer "run now" requests with the method itself.
    markGuardedCron(descriptor.value, jobOptions, method);
    schedule(target, propertyKey, descriptor);
  };
}
