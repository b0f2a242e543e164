import {
  Logger as NestLogger,
  type DynamicModule,
  type FactoryProvider,
  type ModuleMetadata,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { createGuard, Guard } from '../guard/create-guard.js';
import type { DurationInput } from '../core/duration.js';
import type { GuardOptions } from '../guard/guard-options.js';
import type { Logger } from '../core/logger.js';
import { GuardedCronTriggers, setModuleGuard } from './guarded-cron.js';

/** Options of `CronguardModule.forRoot`: the guard's, and what the module does at start-up and shutdown. */
export interface CronguardModuleOptions extends GuardOptions {
  /** Runs `guard.migrate()` at start-up (Nest's onModuleInit), before any scheduled job fires. @default false */
  migrate?: boolean;
  /** How long `shutdown()` (from Nest's onApplicationShutdown) waits for runs in flight. @default '30s' */
  shutdownTimeout?: DurationInput;
}

/** Options of `CronguardModule.forRootAsync`: a factory for the options, with what it injects. */
export interface CronguardModuleAsyncOptions {
  /** Modules the factory's injected providers come from (e.g. ConfigModule). @default [] */
  imports?: ModuleMetadata['imports'];
  /** Providers passed to `useFactory`, in order (e.g. ConfigService). @default [] */
  inject?: FactoryProvider['inject'];
  /** Builds the options from the injected providers. */
  useFactory: (...args: never[]) => CronguardModuleOptions | Promise<CronguardModuleOptions>;
}

/** The injection token of the module's options. */
export const CRONGUARD_MODULE_OPTIONS = Symbol('CRONGUARD_MODULE_OPTIONS');
const CRONGUARD_LIFECYCLE = Symbol('CRONGUARD_LIFECYCLE');
const CRONGUARD_TRIGGERS = Symbol('CRONGUARD_TRIGGERS');

/**
 * A global Nest module that provides a `Guard` (inject it by its class: `constructor(private
 * readonly guard: Guard)`), migrates at start-up when asked, shuts the guard down from Nest's
 * shutdown hooks (call `app.enableShutdownHooks()` for SIGTERM), and serves `@GuardedCron` (each
 * fire, and "run now" requests while the app runs).
 * Nest's `Logger` (context 'Cronguard') is the guard's logger unless `logger` is given.
 */
// eslint-disable-next-line @typescript-eslint/no-extraneous-class -- Nest identifies a module by its class
export class CronguardModule {
  static forRoot(options: CronguardModuleOptions): DynamicModule {
    return CronguardModule.#module([], { provide: CRONGUARD_MODULE_OPTIONS, useValue: options });
  }

  static forRootAsync(options: CronguardModuleAsyncOptions): DynamicModule {
    return CronguardModule.#module(options.imports ?? [], {
      provide: CRONGUARD_MODULE_OPTIONS,
      useFactory: options.useFactory as (...args: unknown[]) => CronguardModuleOptions | Promise<CronguardModuleOptions>,
      inject: options.inject ?? [],
    });
  }

  static #module(
    imports: NonNullable<ModuleMetadata['imports']>,
    optionsProvider: NonNullable<ModuleMetadata['providers']>[number],
  ): DynamicModule {
    return {
      module: CronguardModule,
      global: true,
      // DiscoveryModule: the providers' instances, where the @GuardedCron methods that answer triggers are.
      imports: [...imports, DiscoveryModule],
      providers: [
        optionsProvider,
        { provide: Guard, useFactory: guardFromOptions, inject: [CRONGUARD_MODULE_OPTIONS] },
        {
          provide: CRONGUARD_LIFECYCLE,
          useFactory: (guard: Guard, options: CronguardModuleOptions) => new GuardLifecycle(guard, options),
          inject: [Guard, CRONGUARD_MODULE_OPTIONS],
        },
        {
          provide: CRONGUARD_TRIGGERS,
          useFactory: (discovery: DiscoveryService, guard: Guard) => new GuardedCronTriggers(discovery, guard),
          inject: [DiscoveryService, Guard],
        },
      ],
      exports: [Guard, CRONGUARD_MODULE_OPTIONS],
    };
  }
}

function guardFromOptions(options: CronguardModuleOptions): Guard {
  const { migrate: _migrate, shutdownTimeout: _shutdownTimeout, ...guardOptions } = options;
  const guard = createGuard({ ...guardOptions, logger: guardOptions.logger ?? nestLogger() });
  setModuleGuard(guard);
  return guard;
}

/** Nest's Logger, context 'Cronguard', as the guard's logger. */
function nestLogger(): Logger {
  const logger = new NestLogger('Cronguard');
  return { warn: (message) => logger.warn(message), error: (message) => logger.error(message) };
}

/** Migrates when the module starts, shuts the guard down when the application does. */
class GuardLifecycle implements OnModuleInit, OnApplicationShutdown {
  constructor(
    private readonly guard: Guard,
    private readonly options: CronguardModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    if (this.options.migrate === true) await this.guard.migrate();
  }

  async onApplicationShutdown(): Promise<void> {
    // The module guard stays set: a fire that comes after this is skipped as GUARD_CLOSED (a warning).
    await this.guard.shutdown(this.options.shutdownTimeout === undefined ? {} : { timeout: this.options.shutdownTimeout });
  }
}
