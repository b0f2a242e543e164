import { inspect } from 'node:util';

/**
 * Every `GuardError` code, each with its meaning (editors show it on `GuardErrorCodes.X`). Compare
 * `error.code` with the constant or with the string: each constant's value is its own name.
 *
 * @example
 * if (error instanceof GuardError && error.code === GuardErrorCodes.TABLE_MISSING) await guard.migrate();
 */
export const GuardErrorCodes = {
  /** The acquire statement failed (database unreachable, permission…). The run was skipped. */
  ACQUIRE_FAILED: 'ACQUIRE_FAILED',
  /**
   * The acquire statement took longer than `acquireTimeout`, or the previous acquire of the same
   * job is still waiting after it (no second one is sent). The run was skipped.
   */
  ACQUIRE_TIMEOUT: 'ACQUIRE_TIMEOUT',
  /** The release statement failed. The lock expires by itself at `lockAtMostFor`. */
  RELEASE_FAILED: 'RELEASE_FAILED',
  /** The lock table does not exist: run `guard.migrate()` or `cronguard migrate`. */
  TABLE_MISSING: 'TABLE_MISSING',
  /** The guard was closed; it admits no new runs. */
  GUARD_CLOSED: 'GUARD_CLOSED',
  /** The standalone `guarded()` decorator ran before `setDefaultGuard()`. */
  NO_DEFAULT_GUARD: 'NO_DEFAULT_GUARD',
  /** `migrate()` failed. */
  MIGRATION_FAILED: 'MIGRATION_FAILED',
  /**
   * The database takes no writes: a standby (a replica in recovery) or a server, database or user
   * set read-only. `migrate()` rejects with it; an acquire that meets it skips its run (logged once
   * per guard). Give the guard the primary.
   */
  READ_ONLY_DATABASE: 'READ_ONLY_DATABASE',
  /**
   * The tables are at an older schema version than this cronguard needs (`cronguard migrate` was not
   * run since the upgrade). Logged once as a warning; jobs still run, without what needs the newer schema.
   */
  SCHEMA_OUTDATED: 'SCHEMA_OUTDATED',
  /** The reason of `ctx.signal` when the job's local deadline passed: its lock is about to expire. */
  DEADLINE: 'DEADLINE',
  /** The reason of `ctx.signal` when the guard shuts down: the job should stop. */
  SHUTDOWN: 'SHUTDOWN',
  /** `assertLocked()` was called outside a guarded execution. */
  NOT_LOCKED: 'NOT_LOCKED',
  /** The reason of `ctx.signal` when an extend found the lock taken by another execution. */
  LOCK_LOST: 'LOCK_LOST',
  /** An extend of the lock failed (the database did not answer in time, or errored). */
  EXTEND_FAILED: 'EXTEND_FAILED',
  /** `guard.trigger` on a paused job without `force`: nothing was requested. */
  JOB_PAUSED: 'JOB_PAUSED',
  /** `guard.forget` on a job whose lock is held now: nothing was deleted. */
  JOB_LOCKED: 'JOB_LOCKED',
  /**
   * The reason of `ctx.signal` once the execution has ended (its job returned or threw, and its
   * lock is being or has been given back): for timers and promises the job left behind. Also what
   * `assertLocked()` throws from them, as `NOT_LOCKED`.
   */
  EXECUTION_ENDED: 'EXECUTION_ENDED',
} as const;

/** What went wrong, for code that branches on it: one of {@link GuardErrorCodes}. */
export type GuardErrorCode = (typeof GuardErrorCodes)[keyof typeof GuardErrorCodes];

/**
 * A runtime failure of the guard itself (not of the job). The driver error, when there is one,
 * is the `cause`.
 */
export class GuardError extends Error {
  override readonly name = 'GuardError';
  readonly code: GuardErrorCode;
  /** The job the failure concerns, when there is one. */
  readonly job: string | undefined;

  constructor(code: GuardErrorCode, message: string, options: { cause?: unknown; job?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.job = options.job;
  }
}

/**
 * An error's message for a log line or a wrapping error. Node's refused connection to a host with
 * several addresses (localhost: ::1 and 127.0.0.1) is an AggregateError with an empty message:
 * then its first inner message, else its code. Never throws, whatever it is given (a job can throw
 * `Object.create(null)`, a revoked Proxy, an object whose `toString` or `message` getter throws).
 */
export function messageOf(error: unknown): string {
  try {
    const message = plainMessageOf(error);
    return typeof message === 'string' ? message : String(message);
  } catch {
    return unprintable(error);
  }
}

function plainMessageOf(error: unknown): unknown {
  if (!(error instanceof Error)) return String(error);
  if (error.message !== '') return error.message;
  const inner =
    error instanceof AggregateError ? (error.errors as unknown[]).find((each) => each instanceof Error && each.message !== '') : undefined;
  if (inner instanceof Error) return inner.message;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : error.name;
}

/** What can still be said of a value that cannot be turned into text. */
function unprintable(value: unknown): string {
  let kind: string = typeof value;
  try {
    // "[object Object]", "[object Error]"; throws for a revoked Proxy.
    kind = Object.prototype.toString.call(value);
  } catch {
    // typeof it is.
  }
  return `(a thrown value that cannot be turned into text: ${kind})`;
}

/** The longest error text kept in the history, in characters (code points). */
export const MAX_ERROR_LENGTH = 4_096;

/** NUL, and a UTF-16 surrogate that is not half of a pair. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The job's error as history keeps it: its message (see `messageOf`, which never throws), made
 * storable. Never throws, whatever the job threw.
 */
export function errorText(error: unknown): string {
  return storableText(messageOf(error));
}

/**
 * Text that every dialect stores as is: at most 4,096 characters, never cutting a surrogate pair,
 * with NUL (which PostgreSQL's text refuses: `invalid byte sequence for encoding "UTF8": 0x00`)
 * and lone surrogates (not Unicode: no UTF-8 encodes them) replaced by U+FFFD.
 */
export function storableText(text: string): string {
  // Two UTF-16 units per character at most: a message of megabytes is cut before it is scanned.
  // A pair the cut splits leaves a lone surrogate past the 4,096th character, which goes below.
  const head = text.length <= 2 * MAX_ERROR_LENGTH ? text : text.slice(0, 2 * MAX_ERROR_LENGTH);
  const clean = head.replace(UNSTORABLE, '\uFFFD');
  if (clean.length <= MAX_ERROR_LENGTH) return clean;
  const characters = Array.from(clean);
  return characters.length <= MAX_ERROR_LENGTH ? clean : characters.slice(0, MAX_ERROR_LENGTH).join('');
}

/** How a received option value is shown in a `TypeError` message: strings quoted, the rest inspected. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  return inspect(value, { depth: 1, breakLength: Infinity });
}

/** What a server that refuses writes is (`Dialect.readOnlyKind`). */
export type ReadOnlyKind = 'standby' | 'server';

/** What a guard given a read-only server should be given instead. */
const GIVE_THE_PRIMARY =
  'give the guard the primary (read-write) server, by an address that follows it at a failover ' +
  '(DNS, a virtual IP, a proxy or PgBouncer), not a standby or a read replica';

const DESCRIBED: Record<ReadOnlyKind | 'unknown', string> = {
  standby: 'a read-only standby (in recovery)',
  server: 'a read-only server (read_only, or read-only transactions for this server, database or user)',
  unknown: 'a read-only standby or a read-only server',
};

/**
 * The `READ_ONLY_DATABASE` error: `what` failed because the server refused a write as read-only.
 * `kind` says which when known (`Dialect.readOnlyKind`), else both are named.
 */
export function readOnlyDatabaseError(what: string, kind: ReadOnlyKind | undefined, cause: unknown, job?: string): GuardError {
  return new GuardError('READ_ONLY_DATABASE', `${what}: this database is ${DESCRIBED[kind ?? 'unknown']}; ${GIVE_THE_PRIMARY}`, {
    cause,
    ...(job === undefined ? {} : { job }),
  });
}
