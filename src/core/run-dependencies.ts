import type { Dialect, LockStore } from './dialect.js';
import type { GuardEvents } from './events.js';
import type { ResolvedDefaults } from './job-options.js';
import type { Logger } from './logger.js';
import type { ReleaseBatcher } from './acquire-batch.js';
import type { ReleasedLocks } from './runner-bookkeeping.js';

/** Calls a job inside its run's context (its OpenTelemetry span), and returns what it returned. */
export type RunContext = <T>(runId: string, job: () => T) => T;

/**
 * What a guard's runs depend on and never change: the lock store on its database, its events, its
 * logger. The `Runner` is built with it; the run state (what is in flight, running, being taken)
 * is the Runner's own.
 */
export interface RunDependencies {
  readonly store: LockStore;
  readonly dialect: Dialect;
  readonly lockedBy: string;
  readonly logger: Logger;
  readonly events: GuardEvents;
  /** The guard's defaults, which fill the gaps in a job's options. */
  readonly defaults: ResolvedDefaults;
  /** Whether a skipped execution gets a `skipped` history row. */
  readonly recordSkips: boolean;
  /** How long an acquire, an extend or a release may take before the guard gives up on it. */
  readonly statementTimeoutMs: number;
  /** Runs each job in its run's telemetry context; undefined without telemetry. */
  readonly runContext: RunContext | undefined;
  /** Called once a run that executed has released its lock, whatever started it (the guard's retention prune). */
  readonly afterExecuted: () => void;
}

/**
 * What a held lock (its extends, its release) needs from the runner that took it. Made by the
 * `Runner` for its own parts (`LockAcquirer`, `HeldLock`); nothing outside core/ sees it.
 */
export interface LockSite {
  readonly dependencies: RunDependencies;
  /** The jobs whose lock this runner released itself: their next acquire skips the probe. */
  readonly releasedLocks: ReleasedLocks;
  /** Sends the releases that end in one turn of the event loop together, where the store can. */
  readonly releases: ReleaseBatcher;
  /**
   * Aborts once shutdown has stopped waiting for work in flight and ends the guard's connections:
   * a release that fails after that is not retried (nor waited for: the process may exit).
   */
  readonly stopped: AbortSignal;
  /** Whether the runner is closed (shutting down). */
  isClosed(): boolean;
  /** Keeps `work` in flight (shutdown waits for it, up to its timeout), and returns it. */
  track<T>(work: Promise<T>): Promise<T>;
}
