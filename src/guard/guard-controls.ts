import { createControlStore, type ControlRecord, type ControlStore, type PauseState } from '../admin/controls.js';
import { TriggerPoll, type TriggerAnswer, type TriggerRequest } from '../integrations/triggers/trigger-poll.js';
import type { AcquireRequest, GuardContext } from '../core/dialect.js';
import { parseDuration, type DurationInput } from '../core/duration.js';
import { storableText, GuardError, messageOf, describeValue } from '../core/errors.js';
import type { GuardEvents } from '../core/events.js';
import type { JobFunction } from '../core/execute.js';
import { validateJobName, type ResolvedJob } from '../core/job-options.js';
import type { Logger } from '../core/logger.js';
import type { RunEnding, RunResult } from '../core/run-result.js';

/** Options of `guard.pause`. */
export interface PauseOptions {
  /** When the pause lifts by itself: a Date, or a duration from now (`'2h'`) on the database's clock. @default until `resume` */
  until?: Date | DurationInput;
  /** Why, for the people reading `cronguard locks` and the audit. @default none */
  reason?: string;
  /** Who pauses, for the audit (a dashboard passes its user). @default the guard's `lockedBy` */
  by?: string;
}

/** Options of `guard.resume`. */
export interface ResumeOptions {
  /** Why, for the audit. @default none */
  reason?: string;
  /** Who resumes, for the audit. @default the guard's `lockedBy` */
  by?: string;
}

/** Options of `guard.unlock` and `guard.forget`. */
export interface UnlockOptions {
  /** Why, for the audit. @default none */
  reason?: string;
  /** Who frees the lock (or forgets the job), for the audit (a dashboard passes its user). @default the guard's `lockedBy` */
  by?: string;
}

/** Options of `guard.trigger`. */
export interface TriggerOptions {
  /** Runs it even while the job is paused (else a paused job's trigger is refused with `JOB_PAUSED`). @default false */
  force?: boolean;
  /** Who asks, recorded on the run and in the audit. @default the guard's `lockedBy` */
  by?: string;
}

/** Runs a job for a "run now" request: no slot, and the take clears the request (`AcquireRequest.trigger`). */
export type RunTriggered = (
  job: ResolvedJob,
  fn: JobFunction<unknown>,
  trigger: NonNullable<AcquireRequest['trigger']>,
) => Promise<RunResult<unknown>>;

/** The guard's runs as the controls see them (`GuardControls.attach`). */
interface GuardRuns {
  readonly events: GuardEvents;
  readonly track: <T>(work: Promise<T>) => Promise<T>;
  readonly runTriggered: RunTriggered;
}

/**
 * The key of a guard's internal method that makes this replica answer a job's "run now" requests
 * (`OperatedGuard[TRIGGER_WATCH]`), for the entries above the guard (the NestJS module's
 * `@GuardedCron` methods). Not exported from the package.
 */
export const TRIGGER_WATCH: unique symbol = Symbol('cronguard.triggerWatch');

const MAX_TEXT_LENGTH = 1_000;
const MAX_AUDIT_LIMIT = 1_000;

/**
 * A guard's operator controls: pause, resume, trigger and their audit (delegated to
 * `admin/controls.ts`), the watch for "run now" requests on the jobs this replica schedules, and
 * auto-pause. The arguments are validated here: a `TypeError` names the option and the value.
 */
export class GuardControls {
  readonly #context: GuardContext;
  readonly #store: ControlStore;
  readonly #poll: TriggerPoll;
  /** The guard's runs, attached once they exist (`attach`). */
  #runs: GuardRuns | undefined;
  #warnedNoHistory = false;

  /**
   * `native`: the driver's pool when the guard has it (PostgreSQL listens on a connection of its own
   * from it); `pollIntervalMs`: `controlPollInterval`.
   */
  constructor(context: GuardContext, native: unknown, pollIntervalMs: number) {
    this.#context = context;
    const { dialect, tables, logger } = context;
    this.#store = createControlStore(context.db, dialect, tables);
    this.#poll = new TriggerPoll({
      intervalMs: pollIntervalMs,
      logger,
      pending: () => this.#store.pendingTriggers(),
      isReadOnly: (error) => dialect.isReadOnly(error),
      ...(dialect.listenForTriggers === undefined
        ? {}
        : {
            listen: (wake: () => void, lost: (error: unknown) => void) =>
              dialect.listenForTriggers?.(native, tables, wake, lost, logger) ?? Promise.resolve(undefined),
          }),
    });
  }

  /** The guard's logger, for what works beside the controls (the dashboard's errors). */
  get logger(): Logger {
    return this.#context.logger;
  }

  /**
   * Attaches the guard's runs once they exist: their `events`, `track` (keeps the guard's own
   * follow-up of a run, the auto-pause count, in flight: shutdown waits for it) and how a "run now"
   * request runs.
   */
  attach(events: GuardEvents, track: <T>(work: Promise<T>) => Promise<T>, runTriggered: RunTriggered): void {
    this.#runs = { events, track, runTriggered };
  }

  get #wired(): GuardRuns {
    if (this.#runs === undefined) throw new Error('cronguard: the controls were used before the guard wired them');
    return this.#runs;
  }

  async pause(name: string, options: PauseOptions = {}): Promise<PauseState> {
    this.#assertOpen('pause');
    const job = validateJobName(name);
    const by = this.#by(options.by, job);
    const reason = optionalText(options.reason, 'reason', job);
    const until = options.until === undefined ? null : untilOf(options.until, job);
    const state = await this.#migrated(this.#store.pause({ job, by, reason, until }));
    this.#wired.events.emit('paused', { job, by, reason, until: state.until, auto: false });
    return state;
  }

  async resume(name: string, options: ResumeOptions = {}): Promise<boolean> {
    this.#assertOpen('resume');
    const job = validateJobName(name);
    return this.#migrated(this.#store.resume(job, this.#by(options.by, job), optionalText(options.reason, 'reason', job)));
  }

  async trigger(name: string, options: TriggerOptions = {}): Promise<string> {
    this.#assertOpen('trigger');
    const job = validateJobName(name);
    const force = options.force === undefined ? false : options.force;
    if (typeof force !== 'boolean')
      throw new TypeError(`Expected \`force\` of job ${JSON.stringify(job)} to be a boolean, got ${describeValue(force)}`);
    return this.#migrated(this.#store.requestTrigger(job, this.#by(options.by, job), force));
  }

  /** The job name and the audit of an unlock or a forget, validated as a pause's are. */
  auditOf(name: string, options: UnlockOptions): { job: string; audit: { by: string; reason: string | null } } {
    const job = validateJobName(name);
    return { job, audit: { by: this.#by(options.by, job), reason: optionalText(options.reason, 'reason', job) } };
  }

  async controls(name: string, options: { limit?: number } = {}): Promise<ControlRecord[]> {
    this.#assertOpen('controls');
    const job = validateJobName(name);
    const limit = options.limit === undefined ? 50 : options.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_AUDIT_LIMIT) {
      throw new TypeError(`Expected \`limit\` to be an integer from 1 to ${MAX_AUDIT_LIMIT}, got ${describeValue(limit)}`);
    }
    return this.#migrated(this.#store.audit(job, limit));
  }

  /**
   * Answers "run now" requests for `job` on this replica while it schedules it (`guard.schedule`,
   * a node-cron coordinator's task, a `@GuardedCron` method) by running `fn` as a manual run;
   * returns the function that stops.
   */
  watchTriggers(job: ResolvedJob, fn: JobFunction<unknown>): () => void {
    return this.#poll.register(job.name, async (request) => this.#answer(job, fn, request));
  }

  /**
   * After a run's finish (the guard's `finished` step): a failed run of a job with autoPause is
   * counted once its release answered, when its history row says `failed`; enough failures in a
   * row pause the job. Counting reads the history, so a guard with `history: false` says once that
   * it never pauses.
   */
  countFailure(job: ResolvedJob, ending: RunEnding, released: boolean): void {
    if (job.autoPauseAfterFailures === undefined || ending.status !== 'failed' || !released) return;
    if (!this.#context.history) {
      if (!this.#warnedNoHistory) {
        this.#context.logger.warn(
          `Job "${job.name}" has autoPause, which counts failed runs in the run history: with \`history: false\` it never pauses`,
        );
      }
      this.#warnedNoHistory = true;
      return;
    }
    void this.#wired.track(this.#afterFailure(job, ending.error));
  }

  stop(): Promise<void> {
    return this.#poll.stop();
  }

  async #answer(job: ResolvedJob, fn: JobFunction<unknown>, request: TriggerRequest): Promise<TriggerAnswer> {
    const { logger } = this.#context;
    // Recorded as manual, with who asked, before the job's own code runs.
    const manual: JobFunction<unknown> = async (ctx) => {
      await this.#store.markManual(ctx.runId, request.by).catch((error: unknown) => {
        logger.error(`Recording run ${ctx.runId} of job "${job.name}" as manual failed: ${messageOf(error)}`);
      });
      return fn(ctx);
    };
    try {
      const result = await this.#wired.runTriggered(job, manual, { id: request.id, force: request.force });
      if (result.executed) return 'ran';
      return result.reason === 'paused' ? 'refused' : 'busy';
    } catch (error) {
      // The job's own error: it ran (and its `failed` event, history row and autoPause have it).
      logger.error(`Job "${job.name}" failed: ${messageOf(error)}`);
      return 'ran';
    }
  }

  async #afterFailure(job: ResolvedJob, error: unknown): Promise<void> {
    const failures = job.autoPauseAfterFailures;
    if (failures === undefined) return;
    try {
      const outcomes = await this.#store.latestOutcomes(job.name, failures);
      if (outcomes.length < failures || outcomes.some((status) => status !== 'failed')) return;
      const reason = storableText(
        `auto-paused after ${failures} failed runs in a row; the last failed with: ${messageOf(error)}`.slice(0, MAX_TEXT_LENGTH),
      );
      const by = this.#context.lockedBy;
      if (!(await this.#store.autoPause(job.name, by, reason))) return;
      this.#context.logger.warn(`Job "${job.name}" was ${reason}. No replica runs it until \`cronguard resume\` or guard.resume()`);
      this.#wired.events.emit('paused', { job: job.name, by, reason, until: null, auto: true });
    } catch (cause) {
      this.#context.logger.error(`Counting the failed runs of job "${job.name}" for autoPause failed: ${messageOf(cause)}`);
    }
  }

  /**
   * A control on tables not migrated: the GuardError the reads give (\`TABLE_MISSING\`, saying to
   * migrate), not the driver's "relation does not exist".
   */
  async #migrated<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (cause) {
      if (!this.#context.dialect.isMissingTable(cause)) throw cause;
      throw new GuardError('TABLE_MISSING', 'The cronguard tables do not exist; run `cronguard migrate` or `await guard.migrate()`', {
        cause,
      });
    }
  }

  #assertOpen(method: string): void {
    if (this.#context.isClosed()) throw new GuardError('GUARD_CLOSED', `The guard is shut down; ${method}() is no longer available`);
  }

  #by(value: unknown, job: string): string {
    if (value === undefined) return this.#context.lockedBy;
    if (typeof value === 'string' && value.length > 0 && value.length <= 255) return value;
    throw new TypeError(`Expected \`by\` of job ${JSON.stringify(job)} to be a string of 1 to 255 characters, got ${describeValue(value)}`);
  }
}

function optionalText(value: unknown, option: string, job: string): string | null {
  if (value === undefined) return null;
  if (typeof value === 'string' && value.length <= MAX_TEXT_LENGTH) return storableText(value);
  throw new TypeError(
    `Expected \`${option}\` of job ${JSON.stringify(job)} to be a string of at most ${MAX_TEXT_LENGTH} characters, got ${describeValue(value)}`,
  );
}

/** A pause's end: a valid Date, or a duration greater than 0 from now. */
function untilOf(value: Date | DurationInput, job: string): Date | { afterMs: number } {
  if (value instanceof Date) {
    if (!Number.isNaN(value.getTime())) return value;
    throw new TypeError(`Expected \`until\` of job ${JSON.stringify(job)} to be a valid Date or a duration, got ${describeValue(value)}`);
  }
  const afterMs = parseDuration(value, { option: 'until', job });
  if (afterMs > 0) return { afterMs };
  throw new TypeError(`Expected \`until\` of job ${JSON.stringify(job)} to be a duration greater than 0, got ${describeValue(value)}`);
}
