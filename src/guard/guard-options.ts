import { hostname } from 'node:os';
import { dialectOf, missingDatabase, type DatabaseInput } from '../dialects/connect.js';
import { DEFAULT_TABLE_PREFIX, resolveTableNames } from '../dialects/table-names.js';
import { describeValue } from '../core/errors.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { parseDuration, type DurationInput } from '../core/duration.js';
import { resolveDefaults, type JobDefaults, type ResolvedDefaults } from '../core/job-options.js';
import { consoleLogger, safeLogger, type Logger } from '../core/logger.js';

/** Options of `guard.shutdown`. */
export interface ShutdownOptions {
  /**
   * How long to wait for runs in flight to finish and release. Shutdown resolves within this plus
   * about 2 s whatever the database does; a bad value rejects with a `TypeError`. @default '30s'
   */
  timeout?: DurationInput;
}

/** How a guard connects and what its jobs default to. */
export interface GuardOptions {
  /**
   * Where the lock rows live: a URL, a Kysely instance, or a pg, mysql2 or better-sqlite3 pool/database you own.
   * Required, with no default: every replica must name the same database (a SQLite file is shared
   * only by the processes of one host). `undefined`, as `process.env.DATABASE_URL` is when the
   * variable is not set, is a `TypeError` that says so.
   */
  database: DatabaseInput | undefined;
  /** Prefix of the guard's tables (`<prefix>locks`); an identifier, or `schema.prefix` on PostgreSQL. @default 'cronguard_' */
  tablePrefix?: string;
  /** Who holds a lock, for humans reading the table; not the ownership check (a per-execution token is). @default `${hostname()}:${process.pid}` */
  lockedBy?: string;
  /** Durations for jobs that do not set their own. @default { lockAtLeastFor: 0 } */
  defaults?: JobDefaults;
  /** Receives warnings (a lock lost) and errors (database failures); normal skips are never logged. @default console */
  logger?: Logger;
  /** Records every win in the run history (`<prefix>runs`); `false` writes only the lock row, as ShedLock does, and leaves history, doctor and abandoned-run detection without data. @default true */
  history?: boolean;
  /** Adds a `skipped` row to the run history for each skipped execution (losers then write). @default false */
  recordSkips?: boolean;
  /** Deletes history rows older than this as the guard runs, at most once an hour per process, keeping each job's newest. @default keep everything */
  historyRetention?: DurationInput;
  /**
   * The longest an acquire (or a release) may take, at least 1 ms; a slower acquire skips the run with
   * `ACQUIRE_TIMEOUT` rather than piling up. Bounds the server too: on PostgreSQL the take cannot
   * wait for a row lock longer than this (`lock_timeout`, set inside the statement, on every pool
   * kind), so a take whose process gave up, shut down or exited never commits later; SQLite's busy
   * timeout is this on a file the guard opens. @default '5s'
   */
  acquireTimeout?: DurationInput;
  /** Reports spans and metrics to OpenTelemetry when `@opentelemetry/api` is installed. @default true */
  telemetry?: boolean;
  /**
   * PostgreSQL: send the lock statements as named prepared statements. Behind a transaction pooler
   * that cannot keep them (PgBouncer below 1.21 in transaction mode) the first one fails before it
   * runs (42P05 or 26000), and the guard sends unnamed statements from then on: no need to turn
   * this off there. @default true
   */
  preparedStatements?: boolean;
  /**
   * How often a replica looks for "run now" requests (`guard.trigger`) for the jobs it schedules
   * (`guard.schedule`): one statement per replica for all its jobs, and none while it schedules
   * nothing. On PostgreSQL the replicas also hear of a request at once (LISTEN/NOTIFY) on a
   * connection of their own. At least 100 ms. @default '5s'
   */
  controlPollInterval?: DurationInput;
}

/** Guard options after validation. */
export interface ResolvedGuardOptions {
  readonly database: DatabaseInput;
  readonly dialect: Dialect;
  readonly tables: TableNames;
  readonly lockedBy: string;
  readonly logger: Logger;
  readonly history: boolean;
  readonly recordSkips: boolean;
  readonly retentionMs: number | undefined;
  readonly acquireTimeoutMs: number;
  readonly telemetry: boolean;
  readonly preparedStatements: boolean;
  readonly defaults: ResolvedDefaults;
  readonly controlPollIntervalMs: number;
}

const MAX_LOCKED_BY_LENGTH = 255;

/**
 * Validates the options of `createGuard`, without connecting. A `TypeError` names the option and
 * the value. Each default applies only to `undefined`: an explicit null is a mistake to report.
 */
export function resolveGuardOptions(options: GuardOptions | undefined): ResolvedGuardOptions {
  // `createGuard()`: the one option without a default is missing.
  if (options === undefined) throw missingDatabase();
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected guard options to be an object, got ${describeValue(options)}`);
  }
  const logger = options.logger === undefined ? consoleLogger : options.logger;
  if (typeof logger !== 'object' || logger === null || typeof logger.warn !== 'function' || typeof logger.error !== 'function') {
    throw new TypeError(`Expected \`logger\` to have warn() and error() methods, got ${describeValue(logger)}`);
  }
  const lockedBy = options.lockedBy === undefined ? `${hostname()}:${process.pid}` : options.lockedBy;
  if (typeof lockedBy !== 'string' || lockedBy.length === 0 || lockedBy.length > MAX_LOCKED_BY_LENGTH) {
    throw new TypeError(`Expected \`lockedBy\` to be a string of 1 to ${MAX_LOCKED_BY_LENGTH} characters, got ${describeValue(lockedBy)}`);
  }
  const history = options.history === undefined ? true : options.history;
  if (typeof history !== 'boolean') throw new TypeError(`Expected \`history\` to be a boolean, got ${describeValue(history)}`);
  const recordSkips = options.recordSkips === undefined ? false : options.recordSkips;
  if (typeof recordSkips !== 'boolean') {
    throw new TypeError(`Expected \`recordSkips\` to be a boolean, got ${describeValue(recordSkips)}`);
  }
  // Both write to the run history, which `history: false` turns off: asking for both is a mistake.
  if (!history && recordSkips) throw new TypeError('Expected `recordSkips` to be false when `history` is false, got true');
  const retentionMs =
    options.historyRetention === undefined
      ? undefined
      : parseDuration(options.historyRetention, { option: 'historyRetention', job: undefined });
  if (!history && retentionMs !== undefined) {
    throw new TypeError(`Expected no \`historyRetention\` when \`history\` is false, got ${describeValue(options.historyRetention)}`);
  }
  const acquireTimeoutMs = parseDuration(options.acquireTimeout === undefined ? '5s' : options.acquireTimeout, {
    option: 'acquireTimeout',
    job: undefined,
  });
  // 0 would skip every run: no statement answers in no time (and SQLite's busy timeout 0 fails at
  // the first writer in another process). 1 ms is the smallest whole duration.
  if (acquireTimeoutMs < 1) {
    throw new TypeError(`Expected \`acquireTimeout\` to be a duration of at least 1 ms, got ${describeValue(options.acquireTimeout)}`);
  }
  const telemetry = options.telemetry === undefined ? true : options.telemetry;
  if (typeof telemetry !== 'boolean') throw new TypeError(`Expected \`telemetry\` to be a boolean, got ${describeValue(telemetry)}`);
  const preparedStatements = options.preparedStatements === undefined ? true : options.preparedStatements;
  if (typeof preparedStatements !== 'boolean') {
    throw new TypeError(`Expected \`preparedStatements\` to be a boolean, got ${describeValue(preparedStatements)}`);
  }
  const defaults = resolveDefaults(options.defaults);
  const controlPollIntervalMs = parseDuration(options.controlPollInterval === undefined ? '5s' : options.controlPollInterval, {
    option: 'controlPollInterval',
    job: undefined,
  });
  if (controlPollIntervalMs < 100) {
    throw new TypeError(
      `Expected \`controlPollInterval\` to be a duration of at least 100 ms, got ${describeValue(options.controlPollInterval)}`,
    );
  }
  const database = options.database;
  if (database === undefined) throw missingDatabase();
  const dialect = dialectOf(database);
  const tables = resolveTableNames(options.tablePrefix === undefined ? DEFAULT_TABLE_PREFIX : options.tablePrefix, dialect);
  return {
    database,
    dialect,
    tables,
    lockedBy,
    logger: safeLogger(logger),
    history,
    recordSkips,
    retentionMs,
    acquireTimeoutMs,
    telemetry,
    preparedStatements,
    defaults,
    controlPollIntervalMs,
  };
}
