import { describeValue } from './errors.js';
import { parseDuration, type DurationInput } from './duration.js';
import { resolveCronSlots, type CronSlots } from './cron-slots.js';

/** What one guarded job is: its lock row's name and how long the lock is held. */
export interface JobOptions {
  /** The job's name; one lock row per name. 1 to 255 characters of any Unicode except NUL, stored byte-exact. */
  name: string;
  /** The longest the lock is held, in case the holder dies or hangs; the job must finish within it. @default the guard's `defaults.lockAtMostFor` */
  lockAtMostFor?: DurationInput;
  /** The shortest the lock is held, even when the job ends sooner (absorbs clock and timer lag between replicas). @default the guard's `defaults.lockAtLeastFor`, else 0 */
  lockAtLeastFor?: DurationInput;
  /** Extends the lock while the job runs: `true` every lockAtMostFor / 3, or every given duration. @default false */
  keepAlive?: boolean | DurationInput;
  /** How long before the lock can expire `ctx.signal` fires. @default 5% of lockAtMostFor, at least 1 s, at most half */
  stopMargin?: DurationInput;
  /**
   * The cron expression that another scheduler (`@nestjs/schedule`, node-schedule, croner, a
   * Kubernetes CronJob, a `setInterval`) calls this job on. Each call then claims the slot the
   * expression last fired at on this replica's clock (a call up to 100 ms early claims the coming
   * fire): at most one run per slot across replicas, shared with `guard.schedule` fires and
   * `guard.run` calls of the same job. An explicit `slot` of `guard.run` wins. Read by node-cron:
   * 5 fields, or 6 with seconds first.
   * @default none: each call is unscheduled (only the lock, and lockAtLeastFor, keep calls apart)
   */
  cron?: string;
  /** The IANA time zone `cron` is read in (for `guard.schedule`, its expression). @default the process's time zone */
  timezone?: string;
  /**
   * Pauses the job on every replica after `afterFailures` consecutive failed runs (read from the
   * run history, whichever replicas ran them), with a reason that says so, a `paused` event and one
   * warning; `guard.resume` (or `cronguard resume`) lifts it, and the count starts again from the
   * resume: only runs started after it count. Needs the run history.
   * @default off
   */
  autoPause?: { afterFailures: number };
}

/** Options of one `guard.run` call: the job, and the scheduled slot this call is for. */
export interface RunOptions extends JobOptions {
  /** The nominal scheduled time of this run: at most one execution per (job, slot), across replicas. @default none: an unscheduled call */
  slot?: Date;
}

/** The slot of a run call, or a `TypeError`. */
export function validateSlot(slot: unknown, job: string): Date | null {
  if (slot === undefined) return null;
  if (slot instanceof Date && !Number.isNaN(slot.getTime())) return slot;
  throw new TypeError(`Expected \`slot\` of job ${JSON.stringify(job)} to be a valid Date, got ${describeValue(slot)}`);
}

/** Durations every job of a guard falls back on. */
export interface JobDefaults {
  /** The `lockAtMostFor` of jobs that set none. @default none: each job must set its own */
  lockAtMostFor?: DurationInput;
  /** The `lockAtLeastFor` of jobs that set none. @default 0 */
  lockAtLeastFor?: DurationInput;
}

/** Job options after validation, in milliseconds. Built once per decorator or per call. */
export interface ResolvedJob {
  readonly name: string;
  readonly lockAtMostForMs: number;
  readonly lockAtLeastForMs: number;
  /** How long before the lock's expiry the job's `signal` fires. */
  readonly stopMarginMs: number;
  /** How often keep-alive extends the lock, or undefined without keep-alive. */
  readonly keepAliveIntervalMs: number | undefined;
  /** The job's `cron` option: the slot a call claims; undefined without `cron`. */
  readonly cron: CronSlots | undefined;
  /** `autoPause.afterFailures`, or undefined without auto-pause. */
  readonly autoPauseAfterFailures: number | undefined;
}

/** Defaults after validation. */
export interface ResolvedDefaults {
  readonly lockAtMostForMs: number | undefined;
  readonly lockAtLeastForMs: number;
}

export const MAX_NAME_LENGTH = 255;

/**
 * Validates a pair of default durations: the guard's `defaults` (`label` 'defaults'), or the
 * options of `guard.coordinator()` ('coordinator'), which name their options `${label}.…` in errors.
 */
export function resolveDefaults(defaults: JobDefaults | undefined, label = 'defaults'): ResolvedDefaults {
  if (defaults !== undefined && (typeof defaults !== 'object' || defaults === null)) {
    throw new TypeError(`Expected \`${label}\` to be an object, got ${describeValue(defaults)}`);
  }
  const lockAtMostForMs =
    defaults?.lockAtMostFor === undefined ? undefined : positiveDuration(defaults.lockAtMostFor, `${label}.lockAtMostFor`, undefined);
  const lockAtLeastForMs =
    defaults?.lockAtLeastFor === undefined
      ? 0
      : parseDuration(defaults.lockAtLeastFor, { option: `${label}.lockAtLeastFor`, job: undefined });
  if (lockAtMostForMs !== undefined) {
    const error = lockAtLeastForError(
      { option: `${label}.lockAtLeastFor`, ms: lockAtLeastForMs },
      { option: `${label}.lockAtMostFor`, ms: lockAtMostForMs },
      undefined,
    );
    if (error !== undefined) throw error;
  }
  return { lockAtMostForMs, lockAtLeastForMs };
}

/**
 * Validates the options of one job against the guard's defaults. Throws a `TypeError` naming the
 * option, the job and the value received.
 */
export function resolveJob(options: JobOptions, defaults: ResolvedDefaults): ResolvedJob {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected job options to be an object with a \`name\`, got ${describeValue(options)}`);
  }
  const name = validateJobName(options.name);
  const lockAtMostForMs =
    options.lockAtMostFor === undefined ? defaults.lockAtMostForMs : positiveDuration(options.lockAtMostFor, 'lockAtMostFor', name);
  if (lockAtMostForMs === undefined) {
    throw new TypeError(
      `Expected \`lockAtMostFor\` of job ${JSON.stringify(name)} to be a duration like '5m' or 'PT5M', got undefined ` +
        "(set it on the job or in the guard's `defaults`)",
    );
  }
  const lockAtLeastForMs =
    options.lockAtLeastFor === undefined
      ? defaults.lockAtLeastForMs
      : parseDuration(options.lockAtLeastFor, { option: 'lockAtLeastFor', job: name });
  const source = (option: keyof JobOptions): string => (options[option] === undefined ? `defaults.${option}` : option);
  const tooLong = lockAtLeastForError(
    { option: source('lockAtLeastFor'), ms: lockAtLeastForMs },
    { option: source('lockAtMostFor'), ms: lockAtMostForMs },
    name,
  );
  if (tooLong !== undefined) throw tooLong;
  const stopMarginMs = resolveStopMargin(options.stopMargin, name, lockAtMostForMs);
  return {
    name,
    lockAtMostForMs,
    lockAtLeastForMs,
    stopMarginMs,
    keepAliveIntervalMs: resolveKeepAlive(options.keepAlive, name, lockAtMostForMs, stopMarginMs),
    cron: resolveCronSlots(options.cron, options.timezone, name),
    autoPauseAfterFailures: resolveAutoPause(options.autoPause, name),
  };
}

/** At most this many failures in a row before an auto-pause: the history read stays one small page. */
const MAX_AUTO_PAUSE_FAILURES = 1_000;

function resolveAutoPause(value: JobOptions['autoPause'], job: string): number | undefined {
  if (value === undefined) return undefined;
  const failures = typeof value === 'object' && value !== null ? (value as { afterFailures?: unknown }).afterFailures : undefined;
  if (typeof failures === 'number' && Number.isInteger(failures) && failures >= 1 && failures <= MAX_AUTO_PAUSE_FAILURES) return failures;
  throw new TypeError(
    `Expected \`autoPause\` of job ${JSON.stringify(job)} to be { afterFailures: n } with n a whole number from 1 to ${MAX_AUTO_PAUSE_FAILURES}, got ${describeValue(value)}`,
  );
}

function resolveStopMargin(value: DurationInput | undefined, job: string, lockAtMostForMs: number): number {
  if (value === undefined) return defaultStopMargin(lockAtMostForMs);
  const ms = parseDuration(value, { option: 'stopMargin', job });
  if (ms >= lockAtMostForMs) {
    throw new TypeError(
      `Expected \`stopMargin\` of job ${JSON.stringify(job)} (${ms} ms) to be less than \`lockAtMostFor\` (${lockAtMostForMs} ms)`,
    );
  }
  return ms;
}

/**
 * The keep-alive interval: `true` is lockAtMostFor / 3; a given one must be shorter than
 * lockAtMostFor less the stop margin, or the deadline signal would fire before the first extend.
 */
function resolveKeepAlive(
  value: boolean | DurationInput | undefined,
  job: string,
  lockAtMostForMs: number,
  stopMarginMs: number,
): number | undefined {
  if (value === undefined || value === false) return undefined;
  const beforeMs = lockAtMostForMs - stopMarginMs;
  if (value === true) {
    const intervalMs = lockAtMostForMs / 3;
    // A stop margin of two thirds of lockAtMostFor or more: the deadline signal would fire before
    // the first extend, so keep-alive would never keep the job alive.
    if (intervalMs >= beforeMs) {
      throw new TypeError(
        `Expected \`stopMargin\` of job ${JSON.stringify(job)} (${stopMarginMs} ms) to be less than two thirds of ` +
          `\`lockAtMostFor\` with \`keepAlive: true\`, which extends every ${Math.floor(intervalMs)} ms: the deadline would fire ` +
          `before the first extend. Lower \`stopMargin\` below ${Math.floor(lockAtMostForMs - intervalMs)} ms, or give ` +
          `\`keepAlive\` an interval shorter than ${beforeMs} ms`,
      );
    }
    return intervalMs;
  }
  const ms = parseDuration(value, { option: 'keepAlive', job });
  if (ms <= 0 || ms >= beforeMs) {
    throw new TypeError(
      `Expected \`keepAlive\` of job ${JSON.stringify(job)} to be true or an interval shorter than \`lockAtMostFor\` less ` +
        `\`stopMargin\` (${beforeMs} ms), got ${describeValue(value)}`,
    );
  }
  return ms;
}

/**
 * Checks what can be checked without the guard's defaults: the standalone `guarded()` decorator
 * runs this when it is applied, and `resolveJob` again at call time.
 */
export function checkJobOptions(options: JobOptions): void {
  resolveJob(options, { lockAtMostForMs: Number.MAX_SAFE_INTEGER, lockAtLeastForMs: 0 });
}

/**
 * A job name: 1 to 255 code points of well-formed Unicode without NUL (PostgreSQL `text` cannot
 * hold NUL, and a lone surrogate has no UTF-8 bytes to store byte-exact).
 */
export function validateJobName(name: unknown): string {
  if (typeof name === 'string' && name.length > 0 && name.isWellFormed() && !name.includes('\0')) {
    let codePoints = 0;
    for (const _ of name) codePoints += 1;
    if (codePoints <= MAX_NAME_LENGTH) return name;
  }
  throw new TypeError(`Expected \`name\` to be a string of 1 to ${MAX_NAME_LENGTH} characters without NUL, got ${describeValue(name)}`);
}

/**
 * A lockAtMostFor. A bare number is milliseconds, but one under a second almost always meant
 * seconds (`lockAtMostFor: 30`): a lock that expires before the job has really started lets every
 * replica run it. Such a number is refused; a string (`'500ms'`) says milliseconds plainly.
 */
function positiveDuration(value: DurationInput, option: string, job: string | undefined): number {
  const ms = parseDuration(value, { option, job });
  const of = job === undefined ? '' : ` of job ${JSON.stringify(job)}`;
  if (typeof value === 'number' && value > 0 && value < 1_000) {
    throw new TypeError(
      `Expected \`${option}\`${of} to be a duration like '5m' or 'PT5M', got ${value}: a number is milliseconds, ` +
        `so write '${value}s' for ${value} seconds, or '${value}ms' if you meant milliseconds`,
    );
  }
  if (ms > 0) return ms;
  throw new TypeError(`Expected \`${option}\`${of} to be a duration greater than 0, got ${describeValue(value)}`);
}

function defaultStopMargin(lockAtMostForMs: number): number {
  return Math.min(Math.max(lockAtMostForMs * 0.05, 1_000), lockAtMostForMs / 2);
}

/** One of a lock's two durations, with the option it came from, named as the caller names it (`coordinator.lockAtLeastFor`, `defaults.lockAtMostFor`, …). */
export interface NamedDuration {
  readonly option: string;
  readonly ms: number;
}

/**
 * The rule `lockAtLeastFor ≤ lockAtMostFor`, checked in one place with one message: the `TypeError`
 * naming both options (as the caller calls them), the job when there is one, and both values; or
 * `undefined` when the rule holds. Callers throw it, or log its message where a skip is the answer.
 */
export function lockAtLeastForError(
  lockAtLeastFor: NamedDuration,
  lockAtMostFor: NamedDuration,
  job: string | undefined,
): TypeError | undefined {
  if (lockAtLeastFor.ms <= lockAtMostFor.ms) return undefined;
  const ofJob = job === undefined ? '' : ` of job ${JSON.stringify(job)}`;
  return new TypeError(
    `Expected \`${lockAtLeastFor.option}\`${ofJob} (${lockAtLeastFor.ms} ms) ` +
      `to be at most \`${lockAtMostFor.option}\` (${lockAtMostFor.ms} ms)`,
  );
}
