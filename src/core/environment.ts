import type { AcquireRequest, Dialect, LockStore } from './dialect.js';
import type { GuardEvents } from './events.js';
import type { AcquireFailureLog } from './failure-log.js';
import type { Execution } from './execution-context.js';
import type { InFlight } from './in-flight.js';
import type { ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';
import type { ReleasedLocks } from './released-locks.js';

/** Calls a job inside its run's context (its OpenTelemetry span), and returns what it returned. */
export type RunContext = <T>(runId: string, job: () => T) => T;

/** What one execution needs from its guard. */
export interface ExecuteEnvironment {
  readonly store: LockStore;
  readonly dialect: Dialect;
  readonly lockedBy: string;
  readonly logger: Logger;
  readonly events: GuardEvents;
  /** Whether a skipped execution gets a `skipped` history row. */
  readonly recordSkips: boolean;
  /** The executions whose job is running now, for shutdown to signal. */
  readonly running: Set<Execution>;
  /**
   * The jobs whose acquire is under way in this process, whether it has outlived acquireTimeout,
   * and when it was sent (performance.now()). Their other runs are skipped without sending another
   * acquire, so a hung database holds one acquire per job (one more every ten acquireTimeouts).
   */
  readonly pendingAcquires: Map<string, { timedOut: boolean; sentAt: number }>;
  /** Thins the log of failed acquires during an outage (the events still count every one). */
  readonly failureLog: AcquireFailureLog;
  /** The jobs whose lock this guard released itself: their next acquire skips the probe. */
  readonly releasedLocks: ReleasedLocks;
  /** How long an acquire, an extend or a release may take before the guard gives up on it. */
  readonly statementTimeoutMs: number;
  /** Work that shutdown waits for (up to its timeout) before it ends the pool. */
  readonly inFlight: InFlight;
  /** Whether the guard is shutting down: a job that starts now is told to stop at once. */
  isStopping(): boolean;
  /**
   * Aborts once shutdown has stopped waiting for work in flight and ends the guard's connections:
   * a release that fails after that is not retried (nor waited for: the process may exit).
   */
  readonly stopped: AbortSignal;
  /** Runs each job in its run's telemetry context; undefined without telemetry. */
  readonly runContext: RunContext | undefined;
}

/** An execution that holds its job's lock, between `acquireLock` and `releaseLock`. */
export interface HeldLock {
  readonly job: ResolvedJob;
  readonly request: AcquireRequest;
  /** performance.now() just before the acquire was sent: where the job's deadline counts from. */
  readonly acquireSentAt: number;
}
