import type { ResolvedJob } from './job-options.js';

// The lock-store contract: what a dialect's lock statements answer to the run path (core/acquire.ts,
// core/release.ts), one method per statement shape. dialect.ts re-exports it with the rest of the
// dialect contract.

/** One execution's bid for a job's lock. */
export interface AcquireRequest {
  /** The execution's token: the ownership check, and its run's id. */
  readonly token: string;
  readonly lockedBy: string;
  /** The nominal scheduled time this execution is for, or null for an unscheduled call. */
  readonly slot: Date | null;
  /**
   * This guard released the job's lock itself last time, so the lock is most likely free: skip the
   * probe and go straight to the atomic take (see ReleasedLocks). Never changes who wins: a take
   * that loses is followed by whatever the store needs to say why (and to find a row deleted by hand).
   */
  readonly expectFree: boolean;
  /**
   * A pending "run now" request this execution answers (`guard.trigger`): the take then also
   * requires and clears the lock row's `trigger_id`, so that exactly one replica runs it, ignores
   * the slot watermark (a manual run has no slot), and with `force` ignores a pause. Absent for
   * every other execution.
   */
  readonly trigger?: { readonly id: string; readonly force: boolean };
}

/** One execution's bid in a batch (`LockStore.acquireMany`): its job and its request. */
export interface BatchedAcquire {
  readonly job: ResolvedJob;
  readonly request: AcquireRequest;
}

/** One execution's release in a batch (`LockStore.releaseMany`): its job, token and outcome. */
export interface BatchedRelease {
  readonly job: ResolvedJob;
  readonly token: string;
  readonly outcome: RunOutcome;
}

/**
 * `slot-done`: the lock was free, but this slot (or a later one) already ran. `paused`: an operator
 * paused the job (`guard.pause`), and the pause has not lifted.
 */
export type AcquireOutcome = 'acquired' | 'locked' | 'slot-done' | 'paused';

/** How an execution ended, for its history row. */
export interface RunOutcome {
  /** `cancelled`: the job stopped because its signal aborted, rejecting with the signal's reason. */
  readonly status: 'succeeded' | 'failed' | 'cancelled';
  /**
   * The job's error message (for `cancelled`, the signal's reason), storable on every dialect and
   * cut to 4,096 characters (see error-text.ts); null when it succeeded.
   */
  readonly error: string | null;
}

/**
 * The lock and history statements of one dialect, on the guard's own connections, never inside a
 * caller's transaction, comparing times on the database's clock. A losing acquire is one
 * statement and writes nothing; the README counts the statements of a win per dialect.
 */
export interface LockStore {
  /**
   * Whether each statement runs to its end before the call returns (better-sqlite3): its answer is
   * there before any timer could fire, so the guard arms no acquireTimeout timer around it (the
   * database's own lock wait, SQLite's busy timeout, is what bounds it).
   */
  readonly synchronous: boolean;
  /**
   * Takes the job's lock when it is absent or expired and, for a slot, when no run of that slot or
   * a later one has started (the lock row's `last_slot`). When it does, starts the run's history
   * row (id = token) and marks `abandoned` the run it took over from if that one never released.
   * Every dialect first reads the lock row (the probe: no write, no row lock) and answers a lock
   * held or a slot already run from that read; only a lock that looks free reaches the atomic take.
   * With `expectFree`, the take goes first: it alone decides, and a loser still writes nothing (it
   * may wait for the row's lock on MySQL or the write lock on SQLite, and the store may then read
   * the row to say why).
   */
  acquire(job: ResolvedJob, request: AcquireRequest): Promise<AcquireOutcome>;
  /**
   * Optional: decides several acquires at once, each exactly as `acquire` would (its own decision,
   * token, run row, slot check and pause), in fewer round trips (PostgreSQL: one probe for all
   * that need one, one take for all that look free). Answers in the order given. The guard passes
   * two or more acquires started together (core/acquire-batch.ts), of distinct job names, none a
   * trigger. A rejection means the batch took nothing (its take is one autocommit statement, rolled
   * back), and the guard then sends each acquire alone: a failure of one job's part never fails
   * the others'. A store without it gets each acquire alone.
   */
  acquireMany?(acquires: readonly BatchedAcquire[]): Promise<AcquireOutcome[]>;
  /**
   * Gives the lock up, keeping it until `locked_at + job.lockAtLeastForMs` (0 for a manual run's
   * release: core/release.ts passes the job so), and finishes the run's
   * history row. Matches the lock by token only; false when no lock row matched, meaning the lock
   * expired and someone else took it (the run is then recorded as `overran`).
   */
  release(job: ResolvedJob, token: string, outcome: RunOutcome): Promise<boolean>;
  /**
   * Optional: several releases at once, each exactly as `release` would (matched by its own token,
   * keeping its own lockAtLeastFor, finishing its own run row with its own outcome and `overran`),
   * in fewer round trips. Answers in the order given. The guard passes two or more releases of
   * distinct job names that ended in the same turn of the event loop (core/acquire-batch.ts). A
   * rejection means the batch released nothing (one statement or one transaction, rolled back);
   * the guard then retries each alone, as after a failed `release`.
   */
  releaseMany?(releases: readonly BatchedRelease[]): Promise<boolean[]>;
  /**
   * Moves the lock's expiry to now + `durationMs` (and the run's `lock_until` with it), only while
   * this execution still holds it and it has not expired. False when no row matched: the lock
   * was lost.
   */
  extend(job: ResolvedJob, token: string, durationMs: number): Promise<boolean>;
  /** Records a `skipped` history row (the `recordSkips` option). */
  recordSkip(job: ResolvedJob, request: AcquireRequest): Promise<void>;
  /**
   * Cancels, on the server, every acquire statement of this store still running (shutdown calls
   * it once its timeout has passed). A cancelled statement rolls back: it takes nothing, and its
   * `acquire` rejects at once. One that committed before the cancel reached it answers as usual
   * (the guard gives a late win back). Without it, shutdown can only wait for such a statement
   * (up to its grace) or leave it to the server's own bound (`LockStoreSettings.acquireTimeoutMs`).
   */
  cancelAcquires?(): Promise<void>;
}
