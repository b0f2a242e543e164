import { randomUUID } from 'node:crypto';
import { AcquireBatcher } from './acquire-batch.js';
import type { AcquireOutcome, AcquireRequest, Dialect, RunOutcome } from './dialect.js';
import { GuardError, messageOf, readOnlyDatabaseError } from './errors.js';
import { noteFireStep } from './fire-timeline.js';
import { HeldLock } from './held-lock.js';
import type { ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';
import type { RunDependencies, RunState } from './run-state.js';
import { SKIPPED_LOCKED, SKIPPED_PAUSED, SKIPPED_SLOT_DONE, type Skip, type RunRequest } from './run-result.js';
import { statementAnswer, TIMED_OUT } from './timeout.js';

/** After this many acquireTimeouts, an acquire that never answered no longer holds back the next one. */
const STALE_AFTER_TIMEOUTS = 10;

const ACQUIRE_TIMED_OUT: RunOutcome = Object.freeze({
  status: 'failed',
  error: 'not run: the acquire answered after acquireTimeout',
});

/**
 * Takes locks for a runner, and owns what that needs to remember: the acquires under way in this
 * process, and the log of failed ones. Made and used by the `Runner` only.
 */
export class LockAcquirer {
  readonly #state: RunState;
  /**
   * The jobs whose acquire is under way in this process, whether it has outlived acquireTimeout,
   * and when it was sent (performance.now()). Their other runs are skipped without sending another
   * acquire, so a hung database holds one acquire per job (one more every ten acquireTimeouts).
   */
  readonly #pending = new Map<string, { timedOut: boolean; sentAt: number }>();
  /** Thins the log of failed acquires during an outage (the events still count every one). */
  readonly #failureLog: AcquireFailureLog;
  /** Sends the acquires started in one turn of the event loop together, where the store can. */
  readonly #batcher: AcquireBatcher;

  constructor(state: RunState) {
    this.#state = state;
    this.#failureLog = new AcquireFailureLog(state.dependencies.logger);
    this.#batcher = new AcquireBatcher(state.dependencies.store);
  }

  /** The acquires of these jobs come next, in this turn of the event loop: they go together at once (core/tick-batch.ts). */
  expectTogether(names: readonly string[]): void {
    this.#batcher.expectTogether(names);
  }

  /**
   * Takes the job's lock for one execution, or says why not. Never rejects: a failed or hung acquire
   * is a skip with reason 'error' (fail closed, never run unguarded), reported to the logger and as
   * an `error` event.
   */
  async acquire(job: ResolvedJob, { slot, trigger }: RunRequest): Promise<HeldLock | Skip> {
    const state = this.#state;
    const environment = state.dependencies;
    const pending = this.#pending.get(job.name);
    // An acquire that has not answered for ten times acquireTimeout may never answer (a server that
    // vanished without closing the connection): past that, one fresh acquire may go out, so that a
    // process recovers without a restart once the database is back.
    const waitForPending =
      pending !== undefined && performance.now() - pending.sentAt < STALE_AFTER_TIMEOUTS * environment.statementTimeoutMs;
    // A fresh token per execution is the ownership check; locked_by is only for humans.
    const request: AcquireRequest = {
      token: randomUUID(),
      lockedBy: environment.lockedBy,
      slot,
      expectFree: !waitForPending && state.releasedLocks.takeExpectFree(job.name),
      // A manual run (guard.trigger): the take also requires and clears the pending request.
      ...(trigger === undefined ? {} : { trigger }),
    };
    if (waitForPending) {
      // Another execution of this job in this process is taking the lock: whatever it gets, this
      // one would lose to it. Sending a second acquire would only queue it behind the first (on a
      // row lock, a pool connection, a dead server): a hung database would pile one up per tick.
      // Not recorded as a skipped run either: that too would be a statement behind the first.
      if (!pending.timedOut) return this.#skipped(job, request, 'locked', { record: false });
      const message = `The previous acquire of job "${job.name}" has still not answered after acquireTimeout, so the run was skipped without sending another`;
      return this.#failed(job, slot, new GuardError('ACQUIRE_TIMEOUT', message, { job: job.name }));
    }
    // The deadline counts from before the acquire is sent: the lock's expiry on the database clock
    // cannot be earlier than this plus lockAtMostFor.
    const acquireSentAt = performance.now();
    let acquiring: Promise<AcquireOutcome>;
    noteFireStep('queued', job.name, slot);
    try {
      acquiring = this.#batcher.acquire(job, request);
    } catch (cause) {
      // A store that throws before it has a promise (a driver that cannot even open) still skips.
      return this.#failed(job, slot, acquireError(environment.dialect, job, cause));
    }
    const entry = { timedOut: false, sentAt: acquireSentAt };
    this.#pending.set(job.name, entry);
    const forget = (): void => {
      if (this.#pending.get(job.name) === entry) this.#pending.delete(job.name);
    };
    acquiring.then(forget, forget);
    let outcome: AcquireOutcome | typeof TIMED_OUT;
    try {
      outcome = await statementAnswer(environment.store, acquiring, environment.statementTimeoutMs);
    } catch (cause) {
      if (state.closed) {
        // Shutdown cancelled it on the server (LockStore.cancelAcquires) once its timeout passed.
        const message = `The guard shut down while job "${job.name}" was taking its lock, so the run was skipped`;
        return this.#failed(job, slot, new GuardError('GUARD_CLOSED', message, { cause, job: job.name }));
      }
      return this.#failed(job, slot, acquireError(environment.dialect, job, cause));
    }
    if (outcome === TIMED_OUT) {
      // Skipped rather than piled up behind a hung database. If the acquire still wins later,
      // nobody runs under that lock: give it back at once. Shutdown waits for that (up to its
      // timeout) before it ends the pool, or the lock would stay held for lockAtMostFor.
      entry.timedOut = true;
      void state.track(
        acquiring.then(
          async (late) => {
            // giveBack never rejects. The slot, if any, stays marked as run: nothing ran it.
            if (late === 'acquired') await new HeldLock(state, job, request, acquireSentAt).giveBack(ACQUIRE_TIMED_OUT);
          },
          () => undefined,
        ),
      );
      const message = `Taking the lock of job "${job.name}" took over ${environment.statementTimeoutMs} ms, so the run was skipped`;
      return this.#failed(job, slot, new GuardError('ACQUIRE_TIMEOUT', message, { job: job.name }));
    }
    noteFireStep('answered', job.name, slot);
    // The database answered: an outage this job was in is over.
    this.#failureLog.answered(job.name);
    if (outcome === 'acquired') {
      if (environment.events.has('acquired')) environment.events.emit('acquired', { job: job.name, runId: request.token, slot });
      // The guard's steps after a win (the slot ledger's late and missed slots, the replica's presence).
      environment.steps.won(job, request.token, slot);
      return new HeldLock(state, job, request, acquireSentAt);
    }
    return this.#skipped(job, request, outcome);
  }

  async #skipped(
    job: ResolvedJob,
    request: AcquireRequest,
    reason: 'locked' | 'slot-done' | 'paused',
    { record }: { record: boolean } = { record: true },
  ): Promise<Skip> {
    const environment = this.#state.dependencies;
    if (record && environment.recordSkips) await recordSkip(environment, job, request);
    if (environment.events.has('skipped')) environment.events.emit('skipped', { job: job.name, slot: request.slot, reason });
    // A pause is a result like the others: an event, never a log line per tick.
    if (reason === 'paused') return SKIPPED_PAUSED;
    return reason === 'slot-done' ? SKIPPED_SLOT_DONE : SKIPPED_LOCKED;
  }

  /** A skip for a failed acquire: logged (thinned during an outage), and an `error` and a `skipped` event every time. */
  #failed(job: ResolvedJob, slot: Date | null, error: GuardError): Skip {
    const { events } = this.#state.dependencies;
    if (error.code === 'READ_ONLY_DATABASE') this.#failureLog.failedReadOnly(error.message);
    else this.#failureLog.failed(job.name, error.message);
    events.emit('error', { job: job.name, error });
    events.emit('skipped', { job: job.name, slot, reason: 'error', error });
    return { executed: false, reason: 'error', error };
  }
}

async function recordSkip(environment: RunDependencies, job: ResolvedJob, request: AcquireRequest): Promise<void> {
  try {
    await environment.store.recordSkip(job, request);
  } catch (cause) {
    environment.logger.error(`Recording a skipped run of job "${job.name}" failed: ${messageOf(cause)}`);
  }
}

function acquireError(dialect: Dialect, job: ResolvedJob, cause: unknown): GuardError {
  if (dialect.isLockWaitTimeout(cause)) {
    // The wait was cut by the database's own lock timeout (SQLite's busy timeout, which a guard
    // opened from a URL sets to acquireTimeout; lock_timeout; innodb_lock_wait_timeout).
    return new GuardError(
      'ACQUIRE_TIMEOUT',
      `Taking the lock of job "${job.name}" gave up waiting for another connection's lock, so the run was skipped`,
      {
        cause,
        job: job.name,
      },
    );
  }
  if (dialect.isReadOnly(cause)) {
    // Every job fails alike: the failure log says it once per guard, not per job.
    const what = `Taking the lock of job "${job.name}" failed, so the run was skipped (as the runs of every job will be; said once)`;
    return readOnlyDatabaseError(what, undefined, cause, job.name);
  }
  if (dialect.isMissingTable(cause)) {
    return new GuardError(
      'TABLE_MISSING',
      `The cronguard lock table does not exist; run \`await guard.migrate()\` or \`npx cronguard migrate\`. ` +
        `Job "${job.name}" was skipped.`,
      { cause, job: job.name },
    );
  }
  return new GuardError('ACQUIRE_FAILED', `Taking the lock of job "${job.name}" failed, so the run was skipped: ${messageOf(cause)}`, {
    cause,
    job: job.name,
  });
}

/** At most one line a minute per job while its acquires keep failing. */
export const OUTAGE_SUMMARY_INTERVAL_MS = 60_000;

/** One job's run of failed acquires: when it began, how many failed, and when a line last went out. */
interface Outage {
  readonly since: number;
  failures: number;
  /** Failures since the last line logged (the first failure, or the last summary). */
  unlogged: number;
  loggedAt: number;
}

/**
 * Logs the acquire failures of one guard without flooding its logger: with the database down,
 * every job fails at every tick (100 jobs every second, 100 lines a second). A job's first failure
 * is logged as it is; while the failures last, at most one summary line a minute says how many runs
 * were skipped; the first acquire that gets an answer again logs one line. Only the log is thinned:
 * every failure still emits its `error` and `skipped` events, and so reaches the metrics.
 *
 * A read-only database (`failedReadOnly`) fails every job's acquire for one reason: said once per
 * guard, not once per job, then summed up as any outage, until an acquire gets an answer.
 *
 * The minute is counted on the wall clock (`Date.now()`): this only spaces log lines, and a clock
 * that steps back lets the next summary out at once rather than holding it back.
 */
export class AcquireFailureLog {
  readonly #logger: Logger;
  readonly #outages = new Map<string, Outage>();
  /** The guard-wide outage of a read-only database, if one is under way. */
  #readOnly: Outage | undefined;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** An acquire of `job` failed and its run was skipped; `message` says why. */
  failed(job: string, message: string): void {
    const outage = this.#outages.get(job);
    if (outage === undefined) this.#outages.set(job, this.#began(message));
    else this.#again(outage, `Job ${JSON.stringify(job)} still cannot take its lock`, message);
  }

  /** An acquire failed because the database is read-only: one line for all the guard's jobs. */
  failedReadOnly(message: string): void {
    if (this.#readOnly === undefined) this.#readOnly = this.#began(message);
    else this.#again(this.#readOnly, 'The database is still read-only', message);
  }

  #began(message: string): Outage {
    const now = Date.now();
    this.#logger.error(message);
    return { since: now, failures: 1, unlogged: 0, loggedAt: now };
  }

  #again(outage: Outage, headline: string, message: string): void {
    const now = Date.now();
    outage.failures += 1;
    outage.unlogged += 1;
    if (now - outage.loggedAt < OUTAGE_SUMMARY_INTERVAL_MS && now >= outage.loggedAt) return;
    this.#logger.error(
      `${headline}: ${outage.unlogged} more run(s) skipped since the last message, ` +
        `${outage.failures} since ${new Date(outage.since).toISOString()}. Latest: ${message}`,
    );
    outage.unlogged = 0;
    outage.loggedAt = now;
  }

  /** An acquire of `job` got the database's answer (taken, or held elsewhere): an outage, if any, is over. */
  answered(job: string): void {
    const readOnly = this.#readOnly;
    if (readOnly !== undefined) {
      this.#readOnly = undefined;
      this.#logger.warn(
        `The database takes writes again: ${readOnly.failures} run(s) were skipped since ${new Date(readOnly.since).toISOString()} because it was read-only`,
      );
    }
    const outage = this.#outages.get(job);
    if (outage === undefined) return;
    this.#outages.delete(job);
    this.#logger.warn(
      `Job ${JSON.stringify(job)} can take its lock again: ${outage.failures} run(s) were skipped since ` +
        `${new Date(outage.since).toISOString()} because taking the lock failed`,
    );
  }
}
