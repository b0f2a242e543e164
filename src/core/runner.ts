import { LockAcquirer } from './acquire.js';
import { executionStorage, Execution } from './execution-context.js';
import { GuardError, messageOf } from './errors.js';
import { endingOf, shutdownReason, type JobFunction } from './execute.js';
import { isHeld, type HeldLock } from './held-lock.js';
import { resolveJob, type JobOptions, type ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';
import { RunState, type RunDependencies } from './run-state.js';
import { SUCCEEDED_ENDING, type RunRequest, type RunResult, type Skip } from './run-result.js';
import { withTimeout } from './timeout.js';

/**
 * What the integrations that run a job in this process (the decorators, `guard.schedule`,
 * `@GuardedCron`) need, for a job whose options were validated once, beforehand. The `Runner`
 * implements it; the integrations receive it and never import the guard module. Not part of the
 * package's API.
 */
export interface ResolvedJobRunner {
  resolveJob(options: JobOptions): ResolvedJob;
  /**
   * `resolveJob` for a method decorator: warns once when the job has neither `cron` nor
   * lockAtLeastFor. `spreadMs` is `@GuardedCron`'s `spread` window (null without), for the
   * guard's declaration of the job's schedule.
   */
  resolveDecoratedJob(options: JobOptions, spreadMs?: number | null): ResolvedJob;
  /** Whether the guard is closed: a run asked for now is refused (a `GUARD_CLOSED` skip, with a warning). */
  readonly closed: boolean;
  runResolved<T>(job: ResolvedJob, fn: JobFunction<T>, request: RunRequest): Promise<RunResult<Awaited<T>>>;
  /**
   * The runs of these jobs start next, in this turn of the event loop: their acquires go to the
   * database together as soon as the last of them is asked, not at the end of the turn.
   */
  expectTogether(names: readonly string[]): void;
}

/**
 * What a caller that runs the work itself (the node-cron coordinator: node-cron calls the task)
 * needs: take the lock, then end the run with `HeldLock.finish`, which reports and releases it
 * exactly as the Runner's own runs do. The `Runner` implements it.
 */
export interface LockTaker {
  /** Whether the runner is closed: `take` then refuses. */
  readonly closed: boolean;
  take(job: ResolvedJob, request: RunRequest): Promise<HeldLock | Skip>;
}

/**
 * The one path from a run request to acquire and release, and the owner of a guard's run state:
 * the work in flight (what shutdown waits for), the executions running now (what shutdown tells
 * to stop), the acquires under way (in its `LockAcquirer`), the locks it released itself (the
 * probe-skipping hint), and whether it is closed. Every way of starting a run (`guard.run`,
 * `guard.schedule`, the decorators, `@GuardedCron`, the node-cron coordinator) comes through
 * `runResolved` or `take`, so the events, the metrics and the history rows are the same for all.
 */
export class Runner implements ResolvedJobRunner, LockTaker {
  readonly #dependencies: RunDependencies;
  /** The work in flight, the released locks' hints, closed and ended: shared with the acquirer and the held locks. */
  readonly #state: RunState;
  /** The executions whose job is running now, for shutdown to signal. */
  readonly #running = new Set<Execution>();
  readonly #acquirer: LockAcquirer;
  #unslottedWarning: UnslottedWarning | undefined;

  constructor(dependencies: RunDependencies) {
    this.#dependencies = dependencies;
    this.#state = new RunState(dependencies);
    this.#acquirer = new LockAcquirer(this.#state);
  }

  /** Whether `close` was called: no new run is admitted. */
  get closed(): boolean {
    return this.#state.closed;
  }

  /** Work besides runs that shutdown waits for (the slot ledger's reads and writes after a win, the auto-pause count). */
  track<T>(work: Promise<T>): Promise<T> {
    return this.#state.inFlight.track(work);
  }

  /** The job's options with the guard's defaults filled in; a `TypeError` when one is wrong. */
  resolveJob(options: JobOptions): ResolvedJob {
    return resolveJob(options, this.#dependencies.defaults);
  }

  resolveDecoratedJob(options: JobOptions): ResolvedJob {
    const job = this.resolveJob(options);
    this.#unslottedWarning ??= new UnslottedWarning(this.#dependencies.logger);
    this.#unslottedWarning.check(job);
    return job;
  }

  /**
   * Runs `fn` in this process if this execution takes the job's lock, else skips: acquire, run,
   * `finish` (the outcome's event, the release). A job with a `cron` option and no `slot` in its
   * request claims the slot its expression last fired at (replica clock). A job that throws
   * rejects with exactly what it threw, after the release; the guard's own failures never reject
   * (they are skips).
   */
  async runResolved<T>(job: ResolvedJob, fn: JobFunction<T>, request: RunRequest): Promise<RunResult<Awaited<T>>> {
    // A job called by another scheduler claims the slot its `cron` last fired at (replica clock); a
    // manual run (a trigger) claims none: it must not use up the slot its schedule will fire for.
    const unslotted = request.slot === null && request.trigger === undefined;
    const claimed = unslotted && job.cron !== undefined ? { ...request, slot: job.cron.slotAt(new Date()) } : request;
    if (this.#state.closed) return this.#refuse(job, claimed.slot);
    return this.#state.inFlight.track(this.#execute(job, fn, claimed));
  }

  /**
   * Takes the job's lock for a run whose work happens elsewhere, or says why not (a skip, as from
   * `runResolved`). The caller ends the run with `finish` on the lock it got. Shutdown waits for
   * the acquire, then for the `finish`, but no longer than the lock lasts (lockAtMostFor).
   */
  take(job: ResolvedJob, request: RunRequest): Promise<HeldLock | Skip> {
    if (this.#state.closed) return Promise.resolve(this.#refuse(job, request.slot));
    const taking = this.#acquirer.acquire(job, request).then((held) => {
      // Tracked before `taking` settles, so that shutdown never sees a gap between the two.
      if (isHeld(held)) void this.#state.inFlight.track(held.untilFinishedOrExpired());
      return held;
    });
    return this.#state.inFlight.track(taking);
  }

  expectTogether(names: readonly string[]): void {
    this.#acquirer.expectTogether(names);
  }

  /** Admits no new run from now on (a `GUARD_CLOSED` skip). A lock won meanwhile still runs, told to stop. */
  close(): void {
    this.#state.close();
  }

  /**
   * Closes, tells the running jobs to stop (`ctx.signal`, reason `SHUTDOWN`), and waits until
   * `deadline` (performance.now() time) for the work in flight; if some is left, cancels the
   * acquires still waiting on the server (`LockStore.cancelAcquires`) and waits `graceMs` more.
   * Resolves with how much is still in flight. Never rejects.
   */
  async drain(deadline: number, graceMs: number): Promise<number> {
    this.close();
    for (const execution of this.#running) execution.abort(shutdownReason(execution.name));
    let pending = await this.#state.inFlight.drain(deadline - performance.now());
    const { store, logger } = this.#dependencies;
    const { cancelAcquires } = store;
    if (pending > 0 && cancelAcquires !== undefined) {
      // An acquire still waiting on the server holds a pooled connection, so ending the pool would
      // wait for it, and it could still commit a take once the pool is gone. Cancelled, it rolls
      // back at once; one that committed first answers 'acquired' and is given back by the late-win
      // path, which is in flight too: both settle within the grace.
      const graceEnd = performance.now() + graceMs;
      const cancelling = cancelAcquires.call(store).catch((error: unknown) => {
        logger.warn(`Shutdown: cancelling the acquires still in flight failed: ${messageOf(error)}`);
      });
      await withTimeout(cancelling, graceMs);
      pending = await this.#state.inFlight.drain(graceEnd - performance.now());
    }
    return pending;
  }

  /** The guard's connections are ending: a release that fails from now on is reported at once, not retried. */
  end(): void {
    this.#state.end();
  }

  /** The skip of a run requested once the runner is closed: a warning, and a `skipped` event like every skip. */
  #refuse(job: ResolvedJob, slot: Date | null): Skip {
    const error = new GuardError('GUARD_CLOSED', `The guard is closed; job "${job.name}" was skipped`, {
      job: job.name,
    });
    this.#dependencies.logger.warn(error.message);
    // Every skip emits `skipped` (the OpenTelemetry skip counter counts these), as error skips in acquire do.
    this.#dependencies.events.emit('skipped', { job: job.name, slot, reason: 'error', error });
    return { executed: false, reason: 'error', error };
  }

  /** One execution in this process: acquire, run the job in its context, finish. */
  async #execute<T>(job: ResolvedJob, fn: JobFunction<T>, request: RunRequest): Promise<RunResult<Awaited<T>>> {
    const held = await this.#acquirer.acquire(job, request);
    if (!isHeld(held)) return held;
    const execution = new Execution(job, held.runId, held.slot, held.acquireSentAt, held);
    this.#running.add(execution);
    // Won while the guard began to shut down: the job is told to stop at once.
    if (this.#state.closed) execution.abort(shutdownReason(job.name));
    const { steps } = this.#dependencies;
    let value: Awaited<T>;
    try {
      value = await executionStorage.run(execution, () => steps.inRunContext(execution.runId, () => fn(execution)));
    } catch (jobError) {
      // Read before the execution ends: its signal then aborts with EXECUTION_ENDED.
      const ending = endingOf(execution, jobError);
      this.#ended(execution);
      await held.finish(ending, execution.lockExpiresAt);
      throw jobError;
    }
    this.#ended(execution);
    await held.finish(SUCCEEDED_ENDING, execution.lockExpiresAt);
    return { executed: true, value };
  }

  #ended(execution: Execution): void {
    execution.end();
    this.#running.delete(execution);
  }
}

/**
 * Warns once per job name when a decorated job has neither `cron` nor `lockAtLeastFor`: a method
 * decorator is called by someone else's scheduler, and without a slot a replica whose timer fires
 * a few ms late takes the lock after the first replica's fast run released it, and runs that fire
 * again.
 */
export class UnslottedWarning {
  readonly #warned = new Set<string>();

  constructor(private readonly logger: Logger) {}

  check(job: ResolvedJob): void {
    if (job.cron !== undefined || job.lockAtLeastForMs > 0 || this.#warned.has(job.name)) return;
    this.#warned.add(job.name);
    this.logger.warn(
      `Job "${job.name}" is decorated without \`cron\` and with lockAtLeastFor 0: when a scheduler calls it on ` +
        'several replicas, a fast job can run twice for one fire (a replica whose timer fires late takes the lock after ' +
        'the first run released it). Set `cron` to the expression the scheduler fires it on (in NestJS, use @GuardedCron ' +
        "from 'cronguard/nestjs'), or a lockAtLeastFor longer than the replicas' timer lag, such as '5s'.",
    );
  }
}
