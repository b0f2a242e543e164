import type { ExecutionContext } from '../../core/execution-context.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { UNSCHEDULED, type RunResult, type Skip } from '../../core/run-result.js';
import { GuardError, describeValue } from '../../core/errors.js';
import { type JobOptions, checkJobOptions, type ResolvedJob } from '../../core/job-options.js';
import type { JobFunction } from '../../core/execute.js';
import { spreadOffsetMs, spreadStartMs } from '../../core/spread.js';
import type { ResolvedJobRunner } from '../../core/runner.js';

/**
 * A method decorator for both TypeScript modes. In both, the method must be async and its Promise
 * must admit `undefined` (`Promise<T | undefined>`, or `Promise<void>`), because a skipped call
 * resolves to `undefined`: anything else is a compile error at the decorator.
 */
export interface GuardedDecorator {
  /** Standard decorators (TypeScript 5+ default). */
  <This, Args extends unknown[], Return>(
    method: (this: This, ...args: Args) => Promise<Return>,
    context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Promise<Return>>,
  ): (this: This, ...args: Args) => Promise<Return | undefined>;
  /**
   * `experimentalDecorators` (NestJS and most existing apps). The descriptor it returns holds a
   * method resolving to `Return | undefined`, which the compiler checks against the method's own
   * type, as it checks the replacement method under standard decorators.
   */
  <Args extends unknown[], Return>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<(...args: Args) => Promise<Return>>,
  ): TypedPropertyDescriptor<(...args: Args) => Promise<Return | undefined>>;
}

/** Runs a method body under the job's lock. */
export type GuardedRunner = (fn: (context: ExecutionContext) => Promise<unknown>) => Promise<RunResult<unknown>>;

type AnyMethod = (this: unknown, ...args: unknown[]) => unknown;

/** Builds the decorator around a runner; `this` and the arguments pass through to the method. */
export function createGuardedDecorator(runner: GuardedRunner): GuardedDecorator {
  function wrap(method: AnyMethod): AnyMethod {
    const wrapped = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const result = await runner(async () => method.apply(this, args));
      return result.executed ? result.value : undefined;
    };
    keepDecorations(method, wrapped);
    return wrapped;
  }

  function decorator(...args: unknown[]): unknown {
    const [first, second, third] = args;
    if (isStandardContext(second)) {
      if (second.kind !== 'method' || typeof first !== 'function') {
        throw new TypeError(`Expected @guarded to decorate a method, got ${/^[aeiou]/.test(second.kind) ? 'an' : 'a'} ${second.kind}`);
      }
      return wrap(first as AnyMethod);
    }
    const descriptor = third as PropertyDescriptor | undefined;
    if (descriptor === undefined || typeof descriptor.value !== 'function') {
      const what =
        descriptor === undefined
          ? 'a field'
          : descriptor.get !== undefined || descriptor.set !== undefined
            ? 'an accessor'
            : `a property holding ${describeValue(descriptor.value)}`;
      throw new TypeError(`Expected @guarded to decorate a method, got ${what} (${String(second)})`);
    }
    descriptor.value = wrap(descriptor.value as AnyMethod);
    return descriptor;
  }

  return decorator as GuardedDecorator;
}

function isStandardContext(value: unknown): value is { kind: string } {
  return typeof value === 'object' && value !== null && typeof (value as { kind?: unknown }).kind === 'string';
}

/** Own properties of a function that every function has, and that the wrapper keeps its own of. */
const FUNCTION_OWN = new Set<string | symbol>(['prototype', 'arguments', 'caller']);

/** The part of the `reflect-metadata` API that copying needs; present at run time only if the app loaded it. */
interface ReflectMetadataApi {
  getOwnMetadataKeys(target: object): unknown[];
  getOwnMetadata(key: unknown, target: object): unknown;
  defineMetadata(key: unknown, value: unknown, target: object): void;
}

/**
 * Gives the wrapper what other decorators put on the method, so that the decorator order does not
 * matter: a decorator applied before this one (written below it) marked the original function,
 * and a framework that reads the class later finds only the wrapper. `@nestjs/schedule`'s `@Cron`
 * and every `SetMetadata`-based decorator store `reflect-metadata` metadata on the function
 * itself; others set own properties. Both are copied, with `name` and `length`.
 */
function keepDecorations(method: AnyMethod, wrapped: AnyMethod): void {
  for (const key of Reflect.ownKeys(method)) {
    if (FUNCTION_OWN.has(key)) continue;
    const descriptor = Object.getOwnPropertyDescriptor(method, key);
    if (descriptor !== undefined) Object.defineProperty(wrapped, key, descriptor);
  }
  const metadata = reflectMetadataApi();
  if (metadata === undefined) return;
  for (const key of metadata.getOwnMetadataKeys(method)) {
    metadata.defineMetadata(key, metadata.getOwnMetadata(key, method), wrapped);
  }
}

/** `reflect-metadata`'s functions on the global `Reflect`, when the app imported it; never imported here. */
function reflectMetadataApi(): ReflectMetadataApi | undefined {
  const api = Reflect as unknown as Partial<ReflectMetadataApi>;
  if (
    typeof api.getOwnMetadataKeys !== 'function' ||
    typeof api.getOwnMetadata !== 'function' ||
    typeof api.defineMetadata !== 'function'
  ) {
    return undefined;
  }
  return api as ReflectMetadataApi;
}

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
 * With a `spread` window (`@GuardedCron`'s, in ms; the job then has `cron`), a call claims the slot
 * its expression last fired at and starts the job's offset after that slot (`spreadStartMs`): every
 * replica still races for that nominal slot, so it runs once. The wait holds no process open and
 * no shutdown waits for it; one that ends after the guard closed runs nothing, and says nothing.
 */
export function lateBoundRunner(
  options: JobOptions,
  hostOf: () => RunnerHost | undefined,
  noHost: () => Error,
  spreadMs: number | null = null,
): (fn: JobFunction<unknown>) => Promise<RunResult<unknown>> {
  const resolved = new WeakMap<RunnerHost, ResolvedJob>();
  const offsetMs = spreadOffsetMs(options.name, spreadMs);
  return async (fn) => {
    const host = hostOf();
    if (host === undefined) throw noHost();
    const runner = host[RUNNER];
    let job = resolved.get(host);
    if (job === undefined) {
      job = runner.resolveDecoratedJob(options, spreadMs);
      resolved.set(host, job);
    }
    if (spreadMs === null || job.cron === undefined) return runner.runResolved(job, fn, UNSCHEDULED);
    const slot = job.cron.slotAt(new Date());
    const waitMs = spreadStartMs(job.cron, slot, offsetMs) - Date.now();
    if (waitMs > 0) await sleep(waitMs, undefined, { ref: false });
    if (runner.closed) return closedWhileSpread(job.name);
    return runner.runResolved(job, fn, { slot });
  };
}

/** The result of a spread call whose wait ended after its guard closed: nothing ran, nothing was sent. */
function closedWhileSpread(name: string): Skip {
  const message = `The guard closed while job "${name}" waited for its spread offset; the slot was not run here`;
  return { executed: false, reason: 'error', error: new GuardError('GUARD_CLOSED', message, { job: name }) };
}
