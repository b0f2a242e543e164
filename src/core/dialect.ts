import type { Kysely } from 'kysely';
import type { ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';

export type DialectName = 'postgres' | 'mysql' | 'sqlite';

/** The tables of one guard, from its `tablePrefix`. Names are validated identifiers, unquoted. */
export interface TableNames {
  /** PostgreSQL schema from a `schema.prefix` table prefix. */
  readonly schema: string | undefined;
  readonly locks: string;
  readonly runs: string;
  /** The audit of operator controls (pause, resume, trigger). */
  readonly controls: string;
  /** Kysely's ledger of migrations 001 and 002, as 0.1.0 wrote it; frozen (migrations/index.ts). */
  readonly migrations: string;
  readonly migrationLock: string;
  /** The ledger of migrations 003 onwards: the schema version is the highest number in it. */
  readonly schemaMigrations: string;
  readonly schemaMigrationLock: string;
  /** One row per replica: the cronguard version it runs (migration 003). */
  readonly replicas: string;
  /** The jobs' declared schedules (migration 005): what the slot ledger expects. */
  readonly jobs: string;
}

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
   * Gives the lock up, keeping it until `locked_at + lockAtLeastFor`, and finishes the run's
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

/** Column types the migrations use; the plain SQL files under migrations/sql spell the same. */
export interface ColumnTypes {
  readonly jobName: string;
  readonly timestamp: string;
  readonly lockedBy: string;
  /** A per-execution token, which is also the id of its run in the history. */
  readonly token: string;
  readonly status: string;
  readonly bigint: string;
  readonly boolean: string;
  readonly text: string;
}

/**
 * SQL fragments for reading the tables (history, locks, the CLI), so that every dialect returns the
 * same shapes: names as text, times as instants, whatever the connection's time zone.
 */
export interface ReadSql {
  /** The database's clock, in UTC. */
  readonly now: string;
  /** A time column as a value `new Date()` reads as UTC (a Date, or an ISO text). */
  time(column: string): string;
  /** A job-name column as text. */
  name(column: string): string;
  /** Milliseconds from now until a time column (negative once it has passed). */
  millisecondsUntil(column: string): string;
  /** A Date as a statement parameter compared with a time column. */
  timeParameter(date: Date): unknown;
}

/**
 * Everything dialect-specific, one implementation per folder (src/dialects/postgres, mysql, sqlite),
 * typed by `Native`, the driver's own handle under the guard's Kysely instance (a pg `Pool`, a
 * mysql2 callback pool, a better-sqlite3 `Database`): what the dialect opens from a URL, adopts
 * from the user, and hands its lock store. The guard holds a plain `Dialect` (`Native` unknown):
 * the members that take a `Native` are methods, and the handle it passes one always came from the
 * same dialect object (`open`, `handles.nativeOf`).
 */
export interface Dialect<Native = unknown> {
  readonly name: DialectName;
  /** The identifier quote: `"` (PostgreSQL, SQLite) or a backtick (MySQL). */
  readonly quote: '"' | '`';
  readonly columnTypes: ColumnTypes;
  /** Whether `tablePrefix` may name a schema (`schema.prefix`). */
  readonly supportsSchemas: boolean;
  /**
   * Where unqualified tables are created (PostgreSQL's current_schema()), for a prefix that names
   * no schema; undefined where a connection sees one database's tables only.
   */
  currentSchema?(db: Kysely<unknown>): Promise<string | undefined>;
  /**
   * Whether an index exists, where DDL commits statement by statement (MySQL): a migration cut
   * between its CREATE TABLE and its CREATE INDEXes is finished by the next one. Elsewhere a
   * migration's DDL is one transaction, and `CREATE INDEX IF NOT EXISTS` is enough.
   */
  indexExists?(db: Kysely<unknown>, table: string, index: string): Promise<boolean>;
  /** Appended to CREATE TABLE (engine, character set, WITHOUT ROWID), or empty. */
  readonly createTableSuffix: string;
  readonly reads: ReadSql;
  /** The dialect's lock statements, built once per guard. */
  createLockStore(db: Kysely<unknown>, tables: TableNames, settings: LockStoreSettings<Native>): LockStore;
  /** True for the driver's "no such table" error, so that the message can say to migrate. */
  isMissingTable(error: unknown): boolean;
  /**
   * True for the driver's "gave up waiting for a lock" error (SQLite's busy timeout, PostgreSQL's
   * lock_timeout, InnoDB's lock wait timeout): an acquire that waited too long, not a broken database.
   */
  isLockWaitTimeout(error: unknown): boolean;
  /** True for a migration error that only means another process migrated at the same moment. */
  isMigrationRace(error: unknown): boolean;
  /** Recognising a `database` value (a URL, a driver handle, a Kysely instance) as this dialect's. */
  readonly handles: DialectHandles<Native>;
  /**
   * Opens a pool the guard owns (and ends on close) from a URL; `native` is the driver's pool.
   * `close` ends what `db.destroy()` alone would not (a SQLite file the lock statements opened
   * without Kysely).
   */
  open(url: string, settings: OpenSettings): { db: Kysely<unknown>; native: Native; close?: () => Promise<void> };
  /**
   * Tells the replicas at once that a "run now" request is pending for `job` (PostgreSQL: NOTIFY),
   * so that they need not wait for their next poll. Absent where the database has no such channel.
   */
  notifyTrigger?(db: Kysely<unknown>, tables: TableNames, job: string): Promise<void>;
  /**
   * Listens for `notifyTrigger` on a connection of its own, taken from the driver's pool
   * (`native`); resolves with a function that stops listening, or undefined when it cannot listen
   * (no pool of the guard's). `lost` is called once if the connection drops.
   */
  listenForTriggers?(
    native: Native | undefined,
    tables: TableNames,
    onRequest: () => void,
    lost: (error: unknown) => void,
  ): Promise<(() => Promise<void>) | undefined>;
}

/**
 * How one dialect recognises what a user passes as `database`, and wraps it without taking it
 * over (dialects/<name>/handle.ts). The code that picks a dialect asks each in turn.
 */
export interface DialectHandles<Native> {
  /** Whether a `database` URL names this dialect, by its scheme. */
  ownsUrl(url: string): boolean;
  /**
   * Whether this dialect's URLs name a server (user, password, host), which must parse as the
   * driver will read them; a file URL (`sqlite:<path>`) does not.
   */
  readonly serverUrl: boolean;
  /**
   * The driver handle under a value the user passed in when it is this dialect's kind (a promise
   * pool gives the callback pool it wraps), else undefined. Recognised by shape: the app's driver
   * may be another copy or version than any the guard could import.
   */
  nativeOf(value: object): Native | undefined;
  /** A Kysely instance over the user's handle; the guard never ends it. */
  adopt(native: Native): Kysely<unknown>;
  /** Whether a Kysely instance the user passed in speaks this dialect (asked through Kysely's public API). */
  ownsKysely(db: Kysely<unknown>): boolean;
  /** A Kysely instance the user passed in, as the guard sends its statements through it. */
  adoptKysely(db: Kysely<unknown>): Kysely<unknown>;
  /**
   * A few words naming a handle of this dialect's driver that the guard cannot use and what to
   * pass instead (a pg `Client`: pass a `Pool`), for the `TypeError`; undefined for anything else.
   */
  describeWrongHandle(value: object): string | undefined;
}

/** How a guard's lock statements are sent, and what they write. */
export interface LockStoreSettings<Native = unknown> {
  /**
   * The driver's own handle when the guard has it (a URL, or a pool passed in), for what Kysely
   * does not offer (PostgreSQL's named prepared statements, better-sqlite3's synchronous
   * transactions); undefined for a Kysely instance passed in, or with `preparedStatements: false`.
   */
  readonly native: Native | undefined;
  /** Whether a win starts and finishes a run row (the `history` option); without, only the lock row is written. */
  readonly history: boolean;
  /**
   * The guard's acquireTimeout: the longest an acquire statement may wait for a lock *on the
   * server* (PostgreSQL: `lock_timeout`, set inside the acquire statement itself). The client gives
   * up after that long anyway; bounding the server too means that a statement whose client gave up,
   * shut down or exited can never commit a take afterwards that nobody gives back. Set it on every
   * pool kind (a URL, a pool or a Kysely passed in); a wait cut there is a lock wait timeout
   * (`Dialect.isLockWaitTimeout`), so the run is skipped with ACQUIRE_TIMEOUT.
   */
  readonly acquireTimeoutMs: number;
  /**
   * Whether the acquire statements read the operator's pause from the lock row (its columns come
   * with migration 004). False on tables not migrated that far, which the statements then do not
   * name, so that the jobs still run there (docs/upgrading.md). @default true
   */
  readonly operatorControls?: boolean;
}

/** What a dialect needs from the guard's options to open a pool of its own. */
export interface OpenSettings {
  readonly logger: Logger;
  /**
   * The guard's acquireTimeout, for a server-side bound that belongs to the connection rather than
   * to the statement (SQLite: the busy timeout, so that a write lock held elsewhere cannot hold an
   * acquire longer). See `LockStoreSettings.acquireTimeoutMs` for the bound every pool kind gets.
   */
  readonly acquireTimeoutMs: number;
}
