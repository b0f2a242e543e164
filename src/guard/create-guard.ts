import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import { DEFAULT_DATABASE, dialectOf, openDatabase, type DatabaseInput } from '../database/connect.js';
import { runMigrations } from '../database/migrate.js';
import { DEFAULT_TABLE_PREFIX, resolveTableNames } from '../database/table-names.js';
import { createGuardedDecorator, type GuardedDecorator } from '../decorator/guarded.js';
import { diagnoseJob, RUNS_PER_JOB, type JobDiagnosis } from '../history/doctor.js';
import { createHistoryReader, pointInTime, type HistoryPage, type HistoryQuery } from '../history/history.js';
import { createLockReader, type LockRecord } from '../history/locks.js';
import { createPruner } from '../history/prune.js';
import { describeValue } from './describe-value.js';
import { parseDuration, type DurationInput } from './duration.js';
import type { DialectName, TableNames } from './dialect.js';
import { GuardError } from './errors.js';
import { execute, type ExecuteEnvironment, type JobFunction } from './execute.js';
import {
  resolveDefaults,
  resolveJob,
  validateJobName,
  validateSlot,
  type JobDefaults,
  type JobOptions,
  type ResolvedDefaults,
  type ResolvedJob,
  type RunOptions,
} from './job-options.js';
import { consoleLogger, type Logger } from './logger.js';
import type { RunResult } from './run-result.js';

/** How a guard connects and what its jobs default to. */
export interface GuardOptions {
  /** Where the lock rows live: a URL, a Kysely instance, or a pg, mysql2 or better-sqlite3 pool/database you own. @default 'sqlite:./cronguard.sqlite' */
  database?: DatabaseInput;
  /** Prefix of the guard's tables (`<prefix>locks`); an identifier, or `schema.prefix` on PostgreSQL. @default 'cronguard_' */
  tablePrefix?: string;
  /** Who holds a lock, for humans reading the table; not the ownership check (a per-execution token is). @default `${hostname()}:${process.pid}` */
  lockedBy?: string;
  /** Durations for jobs that do not set their own. @default { lockAtLeastFor: 0 } */
  defaults?: JobDefaults;
  /** Receives warnings (a lock lost) and errors (database failures); normal skips are never logged. @default console */
  logger?: Logger;
  /** Adds a `skipped` row to the run history for each skipped execution (losers then write). @default false */
  recordSkips?: boolean;
  /** Deletes history rows older than this as the guard runs, at most once an hour per process, keeping each job's newest. @default keep everything */
  historyRetention?: DurationInput;
}

/** How often a guard with `historyRetention` prunes, and how much at a time. */
const RETENTION_INTERVAL_MS = 3_600_000;
const RETENTION_MAX_BATCHES = 10;

const MAX_LOCKED_BY_LENGTH = 255;

/** A guard: runs jobs under their lock rows in one database. */
export class Guard {
  /** The dialect of the guard's database. */
  readonly dialect: DialectName;
  readonly #db: Kysely<unknown>;
  readonly #owned: boolean;
  readonly #tables: TableNames;
  readonly #defaults: ResolvedDefaults;
  readonly #environment: ExecuteEnvironment;
  readonly #readHistory: (query?: HistoryQuery) => Promise<HistoryPage>;
  readonly #lockReader: ReturnType<typeof createLockReader>;
  readonly #prune: ReturnType<typeof createPruner>;
  readonly #retentionMs: number | undefined;
  /** performance.now() of the last retention prune; the first comes after the first run. */
  #prunedAt = Number.NEGATIVE_INFINITY;
  #closed = false;

  constructor(options: GuardOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`Expected guard options to be an object, got ${describeValue(options)}`);
    }
    const logger = options.logger === undefined ? consoleLogger : options.logger;
    if (typeof logger !== 'object' || logger === null || typeof logger.warn !== 'function' || typeof logger.error !== 'function') {
      throw new TypeError(`Expected \`logger\` to have warn() and error() methods, got ${describeValue(logger)}`);
    }
    const lockedBy = options.lockedBy === undefined ? `${hostname()}:${process.pid}` : options.lockedBy;
    if (typeof lockedBy !== 'string' || lockedBy.length === 0 || lockedBy.length > MAX_LOCKED_BY_LENGTH) {
      throw new TypeError(
        `Expected \`lockedBy\` to be a string of 1 to ${MAX_LOCKED_BY_LENGTH} characters, got ${describeValue(lockedBy)}`,
      );
    }
    const recordSkips = options.recordSkips === undefined ? false : options.recordSkips;
    if (typeof recordSkips !== 'boolean') {
      throw new TypeError(`Expected \`recordSkips\` to be a boolean, got ${describeValue(recordSkips)}`);
    }
    this.#retentionMs =
      options.historyRetention === undefined
        ? undefined
        : parseDuration(options.historyRetention, { option: 'historyRetention', job: undefined });
    this.#defaults = resolveDefaults(options.defaults);
    // `=== undefined`, not `??`: an explicit null is a mistake to report, not a request for the default.
    const database = options.database === undefined ? DEFAULT_DATABASE : options.database;
    const dialect = dialectOf(database);
    this.#tables = resolveTableNames(options.tablePrefix === undefined ? DEFAULT_TABLE_PREFIX : options.tablePrefix, dialect);
    // Opened last, once every option is known good: a failed createGuard leaves nothing open.
    const opened = openDatabase(database, dialect, logger);
    this.dialect = dialect.name;
    this.#db = opened.db;
    this.#owned = opened.owned;
    this.#environment = {
      store: opened.dialect.createLockStore(opened.db, this.#tables),
      dialect: opened.dialect,
      lockedBy,
      logger,
      recordSkips,
    };
    this.#readHistory = createHistoryReader(opened.db, dialect, this.#tables);
    this.#lockReader = createLockReader(opened.db, dialect, this.#tables);
    this.#prune = createPruner(opened.db, dialect, this.#tables);
  }

  /**
   * Runs `fn` if this execution takes the job's lock, else skips. Resolves with
   * `{ executed: true, value }`, or `{ executed: false, reason }` for a skip; rejects with the
   * job's own error (after releasing the lock), or a `TypeError` for bad options.
   */
  async run<T>(options: RunOptions, fn: JobFunction<T>): Promise<RunResult<Awaited<T>>> {
    const job = resolveJob(options, this.#defaults);
    return this.runResolved(job, fn, validateSlot(options.slot, job.name));
  }

  /** `run` for options validated beforehand (the decorator validates once, when applied). */
  async runResolved<T>(job: ResolvedJob, fn: JobFunction<T>, slot: Date | null = null): Promise<RunResult<Awaited<T>>> {
    if (this.#closed) {
      return {
        executed: false,
        reason: 'error',
        error: new GuardError('GUARD_CLOSED', `The guard is closed; job "${job.name}" was skipped`, { job: job.name }),
      };
    }
    const result = await execute(this.#environment, job, fn, slot);
    if (result.executed) this.#pruneByRetention();
    return result;
  }

  /** With historyRetention, prunes in the background at most once an hour; never delays the job. */
  #pruneByRetention(): void {
    if (this.#retentionMs === undefined || performance.now() - this.#prunedAt < RETENTION_INTERVAL_MS) return;
    this.#prunedAt = performance.now();
    const cutoff = new Date(Date.now() - this.#retentionMs);
    this.#prune(cutoff, RETENTION_MAX_BATCHES).catch((error: unknown) => {
      this.#environment.logger.error(`Pruning the run history failed: ${error instanceof Error ? error.message : String(error)}`);
    });
  }

  /** Validates job options against this guard's defaults; a `TypeError` when they are wrong. */
  resolveJob(job: JobOptions): ResolvedJob {
    return resolveJob(job, this.#defaults);
  }

  /**
   * A method decorator (standard or `experimentalDecorators`) that runs the method under the job's
   * lock. A skipped call resolves to `undefined`. Options are validated here, when applied.
   */
  guarded(options: JobOptions): GuardedDecorator {
    const job = this.resolveJob(options);
    return createGuardedDecorator((fn) => this.runResolved(job, fn));
  }

  /** Runs from the history, newest first, with a cursor for the next page. */
  history(query?: HistoryQuery): Promise<HistoryPage> {
    return this.#reading(() => this.#readHistory(query));
  }

  /** Every lock row with its holder, `held` or `free`, and the time left, on the database's clock. */
  locks(): Promise<LockRecord[]> {
    return this.#reading(() => this.#lockReader.list());
  }

  /** Turns "no such table" into a GuardError that says to migrate. */
  async #reading<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (cause) {
      if (!this.#environment.dialect.isMissingTable(cause)) throw cause;
      throw new GuardError('TABLE_MISSING', 'The cronguard tables do not exist; run `cronguard migrate` or `await guard.migrate()`', {
        cause,
      });
    }
  }

  /**
   * Frees a job's lock by hand, for a lock left by a process that is gone. If that process is in
   * fact alive, its job and the next one can overlap. True when the lock was held.
   */
  unlock(name: string): Promise<boolean> {
    const job = validateJobName(name);
    return this.#reading(() => this.#lockReader.unlock(job));
  }

  /**
   * Per job (every lock row), what its newest runs say: counts, durations, the lockAtMostFor in
   * force, problems, and a suggested lockAtMostFor. What `cronguard doctor` prints.
   */
  async doctor(): Promise<JobDiagnosis[]> {
    return this.#reading(async () => {
      const now = await this.#lockReader.now();
      const diagnoses: JobDiagnosis[] = [];
      for (const lock of await this.#lockReader.list()) {
        const { runs } = await this.#readHistory({ job: lock.name, limit: RUNS_PER_JOB });
        diagnoses.push(diagnoseJob(lock.name, runs, now));
      }
      return diagnoses;
    });
  }

  /**
   * Deletes history rows that started before `olderThan` (a Date, or a duration meaning that long
   * ago), keeping each job's newest run and every `running` row. Returns how many went.
   */
  prune(olderThan: Date | DurationInput): Promise<number> {
    const cutoff = pointInTime(olderThan, 'olderThan');
    return this.#reading(() => this.#prune(cutoff));
  }

  /** Creates or updates the guard's tables. Safe to call from every replica at start-up. */
  async migrate(): Promise<void> {
    await runMigrations(this.#db, this.#environment.dialect, this.#tables);
  }

  /** Stops admitting runs and ends the pool the guard opened (never one you passed in). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#owned) await this.#db.destroy();
  }
}

/** Creates a guard. Options are validated now: a `TypeError` names the option and the value. */
export function createGuard(options: GuardOptions = {}): Guard {
  return new Guard(options);
}
