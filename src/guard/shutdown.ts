import type { ScheduledTask } from 'node-cron';
import type { DurationInput } from '../core/duration.js';
import { messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Runner } from '../core/runner.js';
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
  /** The guard's runner: closed first, then drained. */
  readonly runner: Runner;
  /**
   * Records that this process stopped declaring its schedules (the slot ledger expects no slot of
   * a job after its last declaring process stopped cleanly). Never rejects.
   */
  readonly recordStop: () => Promise<void>;
  /** Ends the pool or file the guard opened; nothing for one passed in. */
  readonly closeDatabase: () => Promise<void>;
}

/**
 * The steps of `guard.shutdown`: close the runner (no new runs, from the call on), stop the tasks,
 * then drain the runner (it tells running jobs to stop, waits up to the timeout for the work in
 * flight, and cuts the acquires still waiting on the server), record the stop of the schedules
 * (the slot ledger), end the pool. Resolves within the
 * timeout plus 2 × SHUTDOWN_GRACE_MS whatever the database does.
 */
export async function shutdownGuard({ timeoutMs, logger, tasks, warmUp, runner, recordStop, closeDatabase }: ShutdownParts): Promise<void> {
  runner.close();
  const deadline = performance.now() + timeoutMs;
  warmUp.stop();
  // node-cron's background tasks stop asynchronously: they count against the timeout too.
  await withTimeout(Promise.all([...tasks].map((task) => task.stop())), timeoutMs);
  tasks.clear();
  const pending = await runner.drain(deadline, SHUTDOWN_GRACE_MS);
  if (pending > 0) {
    logger.warn(`Shutdown: ${pending} run(s) or acquire(s) still in flight after ${timeoutMs} ms; their locks expire at lockAtMostFor`);
  }
  // After the runs in flight (their slots are theirs), before the pool ends; bounded like the rest:
  // a stop not recorded leaves the job's later slots expected, as after a crash.
  if ((await withTimeout(recordStop(), Math.max(deadline - performance.now(), 0) + SHUTDOWN_GRACE_MS)) === TIMED_OUT) {
    logger.warn('Shutdown: recording the stop of the schedules in the slot ledger took too long; their later slots count as missed');
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
