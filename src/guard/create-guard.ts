import type { Kysely } from 'kysely';
import type { RunCoordinator, ScheduledTask } from 'node-cron';
import { openDatabase } from '../dialects/connect.js';
import { createGuardedDecorator, type GuardedDecorator, RUNNER, type RunnerHost } from '../integrations/decorators/guarded.js';
import { Administration, type JobLedger, type MigrationReport, type SlotsQuery, type VersionReport } from '../admin/administration.js';
import { ConnectionWarmUp, openConnections } from '../integrations/node-cron/connection-warm-up.js';
import type { DashboardHandler, DashboardOptions } from '../integrations/dashboard/dashboard.js';
import { createRunCoordinator, type CoordinatorOptions } from '../integrations/node-cron/coordinator.js';
import { scheduleJob, type ScheduleOptions } from '../integrations/node-cron/schedule.js';
import { SlotFires } from '../integrations/node-cron/slot-fires.js';
import type { DialectName, GuardContext } from '../core/dialect.js';
import { parseDuration } from '../core/duration.js';
import { GuardError, messageOf } from '../core/errors.js';
import { GuardEvents, type GuardEventMap, type GuardEventName } from '../core/events.js';
import type { JobFunction } from '../core/execute.js';
import { resolveGuardOptions, type GuardOptions, type ResolvedGuardOptions, type ShutdownOptions } from './guard-options.js';
import { createGuardRunner, GuardRunSteps, NO_RUN_CONTEXT, type SchemaGate } from './guard-runner.js';
import { validateSlot, type JobOptions, type ResolvedJob, type RunOptions } from '../core/job-options.js';
import { UNSCHEDULED, type RunResult } from '../core/run-result.js';
import type { ResolvedJobRunner, Runner } from '../core/runner.js';
import { TIMED_OUT, withTimeout } from '../core/timeout.js';
import { GuardControls } from './guard-controls.js';
import { guardDashboard, OperatedGuard } from './operated-guard.js';
import { ReplicaPresence } from '../admin/replicas.js';
import { reportToOpenTelemetry } from '../integrations/telemetry/opentelemetry.js';
import { probeDatabase, type ProbeOptions, type ProbeReport } from '../admin/probe.js';
import { raceForProbeLock } from './probe-race.js';

/** A guard: runs jobs under their lock rows in one database. */
export class Guard extends OperatedGuard implements RunnerHost {
  /** The dialect of the guard's database. */
  readonly dialect: DialectName;
  readonly #options: ResolvedGuardOptions;
  readonly #db: Kysely<unknown>;
  /** Ends the pool or file the guard opened itself; nothing for one passed in. */
  readonly #closeDatabase: () => Promise<void>;
  /** The one path from a run request to acquire and release, and the owner of the run state. */
  readonly #runner: Runner;
  /**
   * The runner as the integrations and the trigger poll use it: a decorated job with `cron`
   * declares its schedule (the slot ledger) when it is resolved.
   */
  readonly #jobs: ResolvedJobRunner;
  readonly #events: GuardEvents;
  readonly #admin: Administration;
  /** Pause, resume, trigger (the methods of OperatedGuard), the trigger watch, auto-pause. */
  readonly #operator: GuardControls;
  readonly #tasks = new Set<ScheduledTask>();
  readonly #fires = new SlotFires((names) => this.#jobs.expectTogether(names));
  readonly #schemaGate: SchemaGate;
  /** Before a quiet spell's fire, opens the connections its runs need: one reads the schema version if still unknown. */
  readonly #warmUp = new ConnectionWarmUp(this.#tasks, (connections) => openConnections(this.#db, connections, this.#schemaGate.prepare()));
  #shutdown: Promise<void> | undefined;
  readonly #probe: (options?: ProbeOptions) => Promise<ProbeReport>;

  constructor(options: GuardOptions) {
    const resolved = resolveGuardOptions(options);
    const { dialect } = resolved;
    // Opened last, once every option is known good: a failed createGuard leaves nothing open.
    const opened = openDatabase(resolved.database, dialect, {
      logger: resolved.logger,
      acquireTimeoutMs: resolved.acquireTimeoutMs,
    });
    // Built before `this` exists, for the methods OperatedGuard holds.
    const { tables, lockedBy, logger, history } = resolved;
    // What works on the guard's tables beside the runs gets this one object. The runner comes
    // last: it is built with the steps it takes around each run, which the parts below take.
    const context: GuardContext = { db: opened.db, dialect, tables, lockedBy, logger, history, isClosed: () => runner.closed };
    const events = new GuardEvents(logger);
    const admin = new Administration(context, resolved.retentionMs, events, (work) => void runner.track(work));
    const operator = new GuardControls(context, opened.native, resolved.controlPollIntervalMs);
    // What the runner does after each win, around each body and after each finish, by name.
    const steps = new GuardRunSteps(
      admin,
      new ReplicaPresence(context),
      operator,
      resolved.telemetry ? reportToOpenTelemetry(events) : NO_RUN_CONTEXT,
      logger,
    );
    const { runner, schemaGate } = createGuardRunner(resolved, opened, events, steps);
    super(admin, operator);
    this.#admin = admin;
    this.#operator = operator;
    this.#options = resolved;
    this.dialect = dialect.name;
    this.#db = opened.db;
    this.#runner = runner;
    this.#schemaGate = schemaGate;
    this.#jobs = {
      resolveJob: (jobOptions) => runner.resolveJob(jobOptions),
      // A decorated job with `cron` declares its schedule (the slot ledger).
      resolveDecoratedJob: (jobOptions, spreadMs = null) =>
        admin.slotWatch.declareDecorated(runner.resolveDecoratedJob(jobOptions), spreadMs),
      get closed() {
        return runner.closed;
      },
      runResolved: (job, fn, request) => runner.runResolved(job, fn, request),
      expectTogether: (names) => runner.expectTogether(names),
    };
    this.#events = events;
    // Shutdown calls this once it has stopped waiting for work in flight: a late release is then
    // not retried against a pool that is being ended.
    this.#closeDatabase = () => {
      runner.end();
      return opened.close();
    };
    // The probe's race: guards of its own on the same database, each taking on its own connection;
    // its lock rows carry the probe lock's name as lockedBy, and no history.
    const contender = (name: string): Guard =>
      new Guard({ database: resolved.database, tablePrefix: options.tablePrefix, lockedBy: name, history: false, logger: SILENT });
    this.#probe = (probeOptions) =>
      probeDatabase(
        { db: opened.db, dialect, native: opened.native, tables, race: (name, count) => raceForProbeLock(contender, name, count) },
        probeOptions,
      );
    // A "run now" request goes through the runner like any run, with the trigger on its request.
    operator.attach(
      events,
      (work) => runner.track(work),
      (job, fn, trigger) => this.#jobs.runResolved(job, fn, { slot: null, trigger }),
    );
  }

  /** The guard's runner for validated jobs, for this package's integrations only; a decorated job with `cron` declares its schedule. @internal */
  get [RUNNER](): ResolvedJobRunner {
    return this.#jobs;
  }

  /**
   * Runs `fn` if this execution takes the job's lock, else skips. Resolves with
   * `{ executed: true, value }`, or `{ executed: false, reason }` for a skip; rejects with the
   * job's own error (after releasing the lock), or a `TypeError` for bad options.
   * @example
   * const result = await guard.run({ name: 'nightly-report', lockAtMostFor: '10m' }, (ctx) => buildReport(ctx.signal));
   */
  async run<T>(options: RunOptions, fn: JobFunction<T>): Promise<RunResult<Awaited<T>>> {
    const job = this.#runner.resolveJob(options);
    return this.#jobs.runResolved(job, fn, { slot: validateSlot(options.slot, job.name) });
  }

  /**
   * Listens to the guard's events (`acquired`, `skipped` with its reason, `succeeded`, `failed`, `cancelled`, `released`,
   * `lock-lost`, `overran`, `abandoned`, `paused`, `missed`, `late`, `error`: docs/operating.md). Listeners run
   * synchronously; one that throws is logged, never thrown into the guard.
   */
  on<E extends GuardEventName>(event: E, listener: (...payload: GuardEventMap[E]) => void): this {
    this.#events.on(event, listener);
    return this;
  }

  /** Stops listening. */
  off<E extends GuardEventName>(event: E, listener: (...payload: GuardEventMap[E]) => void): this {
    this.#events.off(event, listener);
    return this;
  }

  /**
   * The job's options as the guard will run them: every duration in milliseconds, the guard's
   * defaults filled in, the stop margin and keep-alive interval derived. A `TypeError` when an
   * option is wrong, the same one `run` would throw: for checking job definitions at start-up.
   */
  resolveJob(options: JobOptions): ResolvedJob {
    return this.#runner.resolveJob(options);
  }

  /**
   * A method decorator (standard or `experimentalDecorators`) that runs the method under the job's
   * lock. A skipped call resolves to `undefined`. Options are validated here, when applied.
   * @example
   * class Jobs {
   *   \@guard.guarded({ name: 'nightly-report', lockAtMostFor: '10m' }) // `\@` in JSDoc, `@` in code
   *   async nightlyReport(): Promise<number | undefined> { return buildReport(); }
   * }
   */
  guarded(options: JobOptions): GuardedDecorator {
    const job = this.#jobs.resolveDecoratedJob(options);
    return createGuardedDecorator((fn) => this.#jobs.runResolved(job, fn, UNSCHEDULED));
  }

  /**
   * Schedules `fn` with node-cron under the job's lock: at most one run per slot across replicas.
   * Returns the node-cron task; `shutdown()` stops it. A bad expression, time zone or option is a
   * `TypeError` now.
   * @example
   * guard.schedule('0 3 * * *', { name: 'nightly-report', lockAtMostFor: '30m', timezone: 'Europe/Paris' }, (ctx) => buildReport(ctx.signal));
   */
  schedule<T>(expression: string, options: ScheduleOptions, fn: JobFunction<T>): ScheduledTask {
    if (this.#runner.closed) {
      // A live node-cron task behind a closed guard would only log GUARD_CLOSED at every tick.
      const job = this.#runner.resolveJob(options).name;
      throw new GuardError('GUARD_CLOSED', `The guard is shut down; job "${job}" was not scheduled`, { job });
    }
    return scheduleJob(
      {
        runner: this.#jobs,
        tasks: this.#tasks,
        fires: this.#fires,
        tasksChanged: () => this.#warmUp.requestArm(),
        logger: this.#options.logger,
        slotWatch: this.#admin.slotWatch,
        watchTriggers: (job, each) => this.#operator.watchTriggers(job, each),
        isClosed: () => this.#runner.closed,
      },
      expression,
      options,
      fn,
    );
  }

  /**
   * A RunCoordinator for node-cron tasks with `distributed: true`: locks per task name, with the slot watermark; its tasks answer `trigger`.
   * @example
   * cron.setRunCoordinator(guard.coordinator({ lockAtMostFor: '10m' })); // then cron.schedule(…, { name, distributed: true })
   */
  coordinator(options: CoordinatorOptions = {}): RunCoordinator {
    return createRunCoordinator(
      {
        runner: this.#runner,
        defaults: this.#options.defaults,
        logger: this.#options.logger,
        slotWatch: this.#admin.slotWatch,
        watchTriggers: (job, fn) => this.#operator.watchTriggers(job, fn),
      },
      options,
    );
  }

  /** The web dashboard, a Node `(req, res)` handler: read-only unless `readOnly: false` and `authorize` (docs/dashboard.md). */
  readonly dashboard = (options?: DashboardOptions): DashboardHandler => guardDashboard(this.#admin, this.#operator, options);
  /** The slot ledger per scheduled job: one outcome per slot it should have had (default the last 24 h), as `cronguard slots` prints. */
  readonly slots = (query?: SlotsQuery): Promise<JobLedger[]> => this.#admin.slots(query);

  /**
   * Active checks of the database this guard is given, each `pass`, `warn` or `fail` with its fix
   * (`cronguard doctor --probe`): a read-only or standby server, statements inside a transaction,
   * a transaction pooler (PgBouncer), a cluster (Galera, standbys), this process's clock against
   * the database's (and the `nodes`' against each other), and a live race of `contenders`
   * connections for one probe lock, which exactly one must win (its row is deleted after).
   * @example
   * const report = await guard.probe();
   * for (const check of report.checks) if (check.status !== 'pass') console.warn(check.check, check.finding, check.fix);
   */
  probe(options?: ProbeOptions): Promise<ProbeReport> {
    return this.#probe(options);
  }

  /**
   * Brings the tables to this version's schema (forward only); resolves with the schema versions
   * after, the migrations this call applied and the routines it left out (MySQL's take procedure
   * without the CREATE ROUTINE privilege). Safe on every replica at start-up.
   */
  async migrate(): Promise<MigrationReport> {
    const report = await this.#admin.migrate();
    this.#schemaGate.migrated(report);
    return report;
  }

  /** The tables' schema version, this code's, and which cronguard version each replica and lock holder runs (`cronguard versions`). */
  versions(): Promise<VersionReport> {
    return this.#admin.versions();
  }

  /**
   * Stops admitting runs and stops the tasks `schedule` made; tells running jobs to stop
   * (`ctx.signal`, reason `SHUTDOWN`); waits up to `timeout` for runs in flight to finish, release
   * their locks (keeping lockAtLeastFor) and finish their history rows; then ends the pool the
   * guard opened (never one you passed in). A run still going after `timeout` keeps its lock until
   * lockAtMostFor: releasing it while it runs would let the next run overlap it.
   *
   * Resolves within `timeout` plus about two seconds, whatever the database does. An acquire still
   * waiting on the server at `timeout` (a row lock held by another session) is cancelled there
   * (PostgreSQL: `pg_cancel_backend`), so it rolls back and takes nothing; one that won before the
   * cancel reached it is given back. The server also cuts every acquire's lock wait at
   * `acquireTimeout` by itself, so a process that exits meanwhile cannot leave a late take behind
   * for longer than that. A bad `timeout` rejects with a `TypeError`.
   */
  shutdown(options: ShutdownOptions = {}): Promise<void> {
    let timeoutMs: number;
    try {
      timeoutMs = parseDuration(options.timeout === undefined ? '30s' : options.timeout, { option: 'timeout', job: undefined });
    } catch (error) {
      // A method that returns a promise reports through it, never by throwing.
      return Promise.reject(error as Error);
    }
    // Once: a second call (SIGTERM then SIGINT, or close after shutdown) waits for the first.
    this.#shutdown ??= this.#stop(timeoutMs);
    return this.#shutdown;
  }

  /**
   * `shutdown()` with its default timeout: runs in flight finish and release before the guard's
   * pool ends, so that closing never leaves a lock held for lockAtMostFor.
   */
  close(): Promise<void> {
    return this.shutdown();
  }

  /**
   * The steps of `guard.shutdown`: close the runner (no new runs, from the call on), stop the
   * trigger watch and the tasks, then drain the runner (it tells running jobs to stop, waits up to
   * the timeout for the work in flight, and cuts the acquires still waiting on the server), record
   * the stop of the schedules (the slot ledger), end the pool. Resolves within the timeout plus
   * 2 × SHUTDOWN_GRACE_MS whatever the database does.
   */
  async #stop(timeoutMs: number): Promise<void> {
    const logger = this.#options.logger;
    // No new run from here on; then the trigger watch stops, without waiting for a poll under way.
    this.#runner.close();
    const closedAt = performance.now();
    await this.#operator.stop();
    const deadline = performance.now() + timeoutMs;
    this.#warmUp.stop();
    // node-cron's background tasks stop asynchronously: they count against the timeout too.
    await withTimeout(Promise.all([...this.#tasks].map((task) => task.stop())), timeoutMs);
    this.#tasks.clear();
    const pending = await this.#runner.drain(deadline, SHUTDOWN_GRACE_MS);
    if (pending > 0) {
      logger.warn(`Shutdown: ${pending} run(s) or acquire(s) still in flight after ${timeoutMs} ms; their locks expire at lockAtMostFor`);
    }
    // After the runs in flight (their slots are theirs), before the pool ends; bounded like the rest:
    // a stop not recorded leaves the job's later slots expected, as after a crash. Records that
    // this process stopped declaring its schedules (the slot ledger expects no slot of a job after
    // its last declaring process stopped cleanly), since the runner closed; never rejects.
    if (
      (await withTimeout(
        this.#admin.slotWatch.recordStop(performance.now() - closedAt),
        Math.max(deadline - performance.now(), 0) + SHUTDOWN_GRACE_MS,
      )) === TIMED_OUT
    ) {
      logger.warn('Shutdown: recording the stop of the schedules in the slot ledger took too long; their later slots count as missed');
    }
    // Ending a pool waits for its checked-out connections (node-postgres, mysql2): a statement still
    // waiting on the server must not hold shutdown past its bound. The pool then ends in the
    // background, once that statement answers or the server cuts it.
    const closing = this.#closeDatabase().catch((error: unknown) => {
      logger.warn(`Shutdown: closing the database failed: ${messageOf(error)}`);
    });
    if ((await withTimeout(closing, Math.max(deadline - performance.now(), 0) + SHUTDOWN_GRACE_MS)) === TIMED_OUT) {
      logger.warn('Shutdown: the pool is still closing (a statement is still waiting on the server); it ends in the background');
    }
  }
}

/**
 * How long shutdown waits past its timeout for each of the two things it does then: the cancelled
 * acquires' answers (and the give-back of a take that committed first), then the pool's end. So
 * shutdown resolves within its timeout plus twice this.
 */
const SHUTDOWN_GRACE_MS = 1_000;

const SILENT = { warn: () => undefined, error: () => undefined };

/**
 * Creates a guard. Options are validated now: a `TypeError` names the option and the value.
 * @example
 * const guard = createGuard({ database: process.env.DATABASE_URL }); // required: every replica shares it
 */
export function createGuard(options: GuardOptions): Guard {
  return new Guard(options);
}
