import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';
import type { JobOptions } from '../core/job-options.js';
import type { Guard } from '../guard/create-guard.js';
import { TRIGGER_WATCH } from '../guard/guard-controls.js';

/** Where `@GuardedCron` leaves, on the method it guards, what a manual run needs: the job and the undecorated method. */
const GUARDED_CRON: unique symbol = Symbol('cronguard.guardedCron');

interface GuardedCronMark {
  readonly options: JobOptions;
  readonly method: (this: unknown) => unknown;
}

/** Marks the guarded method (the function Nest's class holds) with its job and the method it wraps. */
export function markGuardedCron(guarded: unknown, options: JobOptions, method: unknown): void {
  if (typeof guarded !== 'function' || typeof method !== 'function') return;
  const mark: GuardedCronMark = { options, method: method as GuardedCronMark['method'] };
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
        this.#stops.push(this.guard[TRIGGER_WATCH](job, () => mark.method.call(instance)));
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
