import type { ScheduledTask } from 'node-cron';
import type { DurationInput } from '../core/duration.js';
import type { ExecuteEnvironment } from '../core/environment.js';
import { messageOf } from '../core/errors.js';
import { shutdownReason } from '../core/execute.js';
import type { InFlight } from '../core/in-flight.js';
import type { Logger } from '../core/logger.js';
import { TIMED_OUT, withTimeout } from '../core/timeout.js';

/** Options of `guard.shutdown`. */
export interface ShutdownOptions {
  /**
   * How long to wait for runs in flight to finish and release. Shutdown resolves within this plus
   * about 2 s whatever the database does; a bad value rejects with a `TypeError`. @default '30s'
   */
  timeout?: DurationInput;
}

/**
 * How long shutdown waits past its timeout for each of the two things it does then: the cancelled
 * acquires' answers (and the give-back of a take that committed first), then the pool's end. So
 * shutdown resolves within its timeout plus twice this.
 */
export const SHUTDOWN_GRACE_MS = 1_000;

/** What a guard's shutdown stops, waits for and ends. */
export interface ShutdownParts {
  readonly timeoutMs: number;
  readonly logger: Logger;
  readonly tasks: Set<ScheduledTask>;
  readonly warmUp: { stop(): void };
  readonly environment: ExecuteEnvironment;
  readonly inFlight: InFlight;
  /** Ends the pool or file the guard opened; nothing for one passed in. */
  readonly closeDatabase: () => Promise<void>;
}

/**
 * The steps of `guard.shutdown`, once the guard admits no new runs: stop the tasks, tell running
 * jobs to stop, wait up to the timeout for the work in flight, cut the acquires still waiting on
 * the server, end the pool. Resolves within the timeout plus 2 × SHUTDOWN_GRACE_MS whatever the
 * database does.
 */
export async function shutdownGuard({ timeoutMs, logger, tasks, warmUp, environment, inFlight, closeDatabase }: ShutdownParts): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  warmUp.stop();
  // node-cron's background tasks stop asynchronously: they count against the timeout too.
  await withTimeout(Promise.all([...tasks].map((task) => task.stop())), timeoutMs);
  tasks.clear();
  for (const execution of environment.running) execution.abort(shutdownReason(execution.name));
  let pending = await inFlight.drain(deadline - performance.now());
  const { cancelAcquires } = environment.store;
  if (pending > 0 && cancelAcquires !== undefined) {
    // An acquire still waiting on the server holds a pooled connection, so ending the pool would
    // wait for it, and it could still commit a take once the pool is gone. Cancelled, it rolls
    // back at once; one that committed first answers 'acquired' and is given back by the late-win
    // path, which is in flight too: both settle within the grace.
    const graceEnd = performance.now() + SHUTDOWN_GRACE_MS;
    const cancelling = cancelAcquires.call(environment.store).catch((error: unknown) => {
      logger.warn(`Shutdown: cancelling the acquires still in flight failed: ${messageOf(error)}`);
    });
    await withTimeout(cancelling, SHUTDOWN_GRACE_MS);
    pending = await inFlight.drain(graceEnd - performance.now());
  }
  if (pending > 0) {
    logger.warn(`Shutdown: ${pending} run(s) or acquire(s) still in flight after ${timeoutMs} ms; their locks expire at lockAtMostFor`);
  }
  // Ending a pool waits for its checked-out connections (node-postgres, mysql2): a statement still
  // waiting on the server must not hold shutdown past its bound. The pool then ends in the
  // background, once that statement answers or the server cuts it.
  const closing = closeDatabase().catch((error: unknown) => {
    logger.warn(`Shutdown: closing the database failed: ${messageOf(error)}`);
  });
  if ((await withTimeout(closing, Math.max(deadline - performance.now(), 0) + SHUTDOWN_GRACE_MS)) === TIMED_OUT) {
    logger.warn('Shutdown: the pool is still closing (a statement is still waiting on the server); it ends in the background');
  }
}
