import { Cron } from '@nestjs/schedule';
import { lateBoundRunner, createGuardedDecorator } from '../integrations/decorators/guarded.js';
import { GuardError } from '../core/errors.js';
import { checkJobOptions, type JobOptions } from '../core/job-options.js';
import { resolveCronSlots } from '../core/cron-slots.js';
import type { DurationInput } from '../core/duration.js';
import { resolveSpread } from '../core/spread.js';
import type { Guard } from '../guard/create-guard.js';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';
import { TRIGGER_WATCH } from '../guard/guard-controls.js';

/** Options of `@GuardedCron`: the job's, less `cron` and `timezone`, which come from the expression and `timeZone`. */
export interface GuardedCronOptions extends Omit<JobOptions, 'cron' | 'timezone'> {
  /**
   * The IANA time zone the expression is read in, by `@nestjs/schedule` and by the guard alike
   * (Nest's spelling). @default the process's time zone
   */
  timeZone?: string;
  /** Registers the job as disabled in Nest's SchedulerRegistry (start it by hand). @default false */
  disabled?: boolean;
  /**
   * Starts each run a stable offset after its slot, inside this window: the offset comes from a
   * hash of the job's name (the same on every replica and after every restart), so jobs on the same
   * schedule stop hitting the database at the same instant. The slot stays the nominal time (what
   * `ctx.slot` and the history show; every replica races for it, so it runs once), and the slot
   * ledger does not count a spread run late. Shorter than the time between two slots (a `TypeError`
   * otherwise); as `guard.schedule`'s `spread`.
   * @default 0: no spread, each run starts at its slot
   */
  spread?: DurationInput;
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
  const { timeZone, disabled, spread, ...job } = options;
  const jobOptions: JobOptions = {
    ...job,
    cron: expression,
    ...(timeZone === undefined ? {} : { timezone: timeZone }),
  };
  checkJobOptions(jobOptions);
  const spreadMs = resolveSpread(spread, jobOptions.name, resolveCronSlots(expression, timeZone, jobOptions.name));
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
      spreadMs,
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
    markGuardedCron(descriptor.value, jobOptions, method, spreadMs);
    schedule(target, propertyKey, descriptor);
  };
}

let moduleGuard: Guard | undefined;

/** The guard CronguardModule made, for @GuardedCron methods; undefined before the module is created. */
export function currentModuleGuard(): Guard | undefined {
  return moduleGuard;
}

/** Set by CronguardModule when it creates its guard. */
export function setModuleGuard(guard: Guard | undefined): void {
  moduleGuard = guard;
}

/** Where `@GuardedCron` leaves, on the method it guards, what a manual run needs: the job and the undecorated method. */
const GUARDED_CRON: unique symbol = Symbol('cronguard.guardedCron');

interface GuardedCronMark {
  readonly options: JobOptions;
  readonly method: (this: unknown) => unknown;
  /** The `spread` window in ms, or null: the job's schedule is declared with it. */
  readonly spreadMs: number | null;
}

/** Marks the guarded method (the function Nest's class holds) with its job and the method it wraps. */
export function markGuardedCron(guarded: unknown, options: JobOptions, method: unknown, spreadMs: number | null): void {
  if (typeof guarded !== 'function' || typeof method !== 'function') return;
  const mark: GuardedCronMark = { options, method: method as GuardedCronMark['method'], spreadMs };
  Object.defineProperty(guarded, GUARDED_CRON, { value: mark });
}

/**
 * Makes the app's `@GuardedCron` methods answer "run now" requests while the app runs: when Nest
 * has started every module, each provider and controller instance (singletons, as
 * `@nestjs/schedule` schedules only those) is searched for marked methods, the way
 * `@nestjs/schedule` finds its `@Cron` methods, and each is watched under its job name. A trigger
 * then calls the method (not Nest's cron callback) on its instance as a manual run, through the
 * guard's trigger take. Nest's shutdown (its first phase, before the guard's) ends the watch.
 */
export class GuardedCronTriggers implements OnApplicationBootstrap, OnModuleDestroy {
  readonly #stops: (() => void)[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly guard: Guard,
  ) {}

  onApplicationBootstrap(): void {
    for (const wrapper of [...this.discovery.getControllers(), ...this.discovery.getProviders()]) {
      const instance: unknown = wrapper.instance;
      if (typeof instance !== 'object' || instance === null || !wrapper.isDependencyTreeStatic()) continue;
      for (const mark of marksOf(instance)) {
        const job = this.guard.resolveJob(mark.options);
        this.#stops.push(this.guard[TRIGGER_WATCH](job, () => mark.method.call(instance), mark.spreadMs));
      }
    }
  }

  onModuleDestroy(): void {
    for (const stop of this.#stops.splice(0)) stop();
  }
}

/** The marked methods of an instance, along its prototype chain (a method overridden below is read once, as `instance[key]`). */
function marksOf(instance: object): GuardedCronMark[] {
  const marks: GuardedCronMark[] = [];
  const seen = new Set<string | symbol>();
  for (let prototype = Object.getPrototypeOf(instance) as object | null; prototype !== null && prototype !== Object.prototype;) {
    for (const key of Reflect.ownKeys(prototype)) {
      if (seen.has(key) || key === 'constructor') continue;
      seen.add(key);
      // Read from the descriptor, so that no getter of the instance runs.
      const value: unknown = Object.getOwnPropertyDescriptor(prototype, key)?.value;
      const mark = typeof value === 'function' ? (value as { [GUARDED_CRON]?: GuardedCronMark })[GUARDED_CRON] : undefined;
      if (mark !== undefined) marks.push(mark);
    }
    prototype = Object.getPrototypeOf(prototype) as object | null;
  }
  return marks;
}
