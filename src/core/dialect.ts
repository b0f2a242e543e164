import type { Kysely, RawBuilder, TableMetadata } from 'kysely';
import type { LockStore } from './lock-store.js';
import type { ReadOnlyKind } from './errors.js';
import type { Logger } from './logger.js';

export type { AcquireOutcome, AcquireRequest, BatchedAcquire, BatchedRelease, LockStore, RunOutcome } from './lock-store.js';

export type DialectName = 'postgres' | 'mysql' | 'sqlite';

/** The tables of one guard, from its `tablePrefix`. Names are validated identifiers, unquoted. */
export type { ReadOnlyKind } from './errors.js';

/**
 * A guard's database and identity, made once by the guard and handed whole to what works on its
 * tables beside the runs: the administration, the slot watch, the replica presence, the operator
 * controls.
 */
export interface GuardContext {
  readonly db: Kysely<unknown>;
  readonly dialect: Dialect;
  readonly tables: TableNames;
  readonly lockedBy: string;
  readonly logger: Logger;
  /** Whether runs write history rows (the `history` option). */
  readonly history: boolean;
  /** True once the guard is shut down: its pool is ended (or ending). */
  isClosed(): boolean;
}

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
  /**
   * Which guard process declares which job's schedule, from when, and when it stopped cleanly
   * (migration 007): the slot ledger expects no slot after the last declaring process stopped.
   */
  readonly declarations: string;
  /** One row: who migrates now and until when (admin/migration-lease.ts); created by `migrate()` itself. */
  readonly migrationLease: string;
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
  /** The database's clock `milliseconds` ago, the milliseconds a bound parameter (a clean stop's time). */
  nowMinus(milliseconds: number): RawBuilder<unknown>;
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
  /**
   * The tables among `names` in `schema` (the current schema when undefined), with their columns,
   * read by one statement filtered by schema and names, for the migrations and Kysely's migrator
   * (admin/own-tables-introspection.ts). Where absent, Kysely's introspector, which on that dialect
   * reads one file's tables (SQLite). PostgreSQL has it: its Kysely introspector reads every schema
   * and resolves other apps' tables by name, so another app's DDL at the same instant failed
   * `migrate()`. MySQL has it: its Kysely introspector reads every column of the database, which
   * MariaDB answers by opening every table's definition (seconds beside a few hundred tables).
   */
  findTables?(db: Kysely<unknown>, schema: string | undefined, names: readonly string[]): Promise<TableMetadata[]>;
  /**
   * Creates the dialect's stored routines, unless they exist (migration 006). MySQL has one: the
   * take of a batch in one round trip (dialects/mysql/schema.ts). Where absent, none.
   * Resolves with the names of the routines it left out because the user may not create them
   * (no CREATE ROUTINE privilege), which `migrate()` reports; none when all exist.
   */
  createRoutines?(db: Kysely<unknown>, tables: TableNames): Promise<string[]>;
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
  /**
   * True for a migration error that only means another process migrated at the same moment ("already
   * exists", a duplicate column, key or ledger row, a deadlock): retried, it finds the work done.
   */
  isMigrationRace(error: unknown): boolean;
  /** The statements of the lease that lets one `migrate()` at a time run (admin/migration-lease.ts). */
  readonly migrationLease: MigrationLeaseSql;
  /**
   * Reads what `guard.probe()` checks about the server (core/server-facts.ts): its version and
   * settings, whether it is read-only, a pooler in front of it, a cluster around it. `native` is
   * the driver's pool when the guard has one (some checks need two connections of their own).
   */
  inspectServer(db: Kysely<unknown>, native: Native | undefined): Promise<ServerFacts>;
  /**
   * True for the driver's "this server takes no writes" error: a standby in recovery or a read-only
   * transaction (PostgreSQL), a server running read-only or a read-only transaction (MySQL), a
   * read-only file (SQLite). The guard then says so (`READ_ONLY_DATABASE`), not "run migrate".
   */
  isReadOnly(error: unknown): boolean;
  /**
   * Which kind of read-only server this is, asked once a write was refused as read-only, so that the
   * message can say: a `standby` (a replica replaying its primary's log) or a `server` set
   * read-only; undefined (or absent) where the dialect cannot tell.
   */
  readOnlyKind?(db: Kysely<unknown>): Promise<ReadOnlyKind | undefined>;
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
   * (no pool of the guard's, or connections that cannot hold a LISTEN: a transaction pooler, said
   * once on `logger`). `lost` is called once if the connection drops.
   */
  listenForTriggers?(
    native: Native | undefined,
    tables: TableNames,
    onRequest: () => void,
    lost: (error: unknown) => void,
    logger: Logger,
  ): Promise<(() => Promise<void>) | undefined>;
}

/**
 * How one dialect recognises what a user passes as `database`, and wraps it without taking it
 * over (dialects/<name>/dialect.ts). The code that picks a dialect asks each in turn.
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

/**
 * The migration lease's statements (dialects/<name>/schema.ts): one row in
 * `tables.migrationLease`, whose `holder` is the random token of the `migrate()` that holds it until
 * `expires_at` (the database's clock). Every statement is one autocommit statement: no session
 * state, so they work through a transaction pooler, and a row replicates (Galera) where a session
 * lock (GET_LOCK, pg_advisory_lock) holds on one server only.
 */
export interface MigrationLeaseSql {
  /** Creates the table and its one row, unless they exist; repeatable, and retried when racing. */
  create(tables: TableNames): readonly RawBuilder<unknown>[];
  /** Takes the lease for `token` until `ttlMs` from now if nobody holds it or its holder's lease expired: 1 affected row when taken, 0 when not. */
  take(tables: TableNames, token: string, ttlMs: number): RawBuilder<unknown>;
  /** Moves the expiry of `token`'s lease to `ttlMs` from now: 0 affected rows when it lost the lease. */
  renew(tables: TableNames, token: string, ttlMs: number): RawBuilder<unknown>;
  /** Gives the lease back if `token` still holds it. */
  release(tables: TableNames, token: string): RawBuilder<unknown>;
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

/**
 * What a dialect reads about the server a guard is given, for `guard.probe()` (admin/probe.ts):
 * facts only; the probe decides what each means for the guard's promises.
 */
export interface ServerFacts {
  /** The server and its version, e.g. "PostgreSQL 16.4", "MariaDB 10.11.6", "SQLite 3.46.1". */
  readonly version: string;
  /** Settings the guard's statements depend on, as the server reports them (isolation, sql_mode, journal mode). */
  readonly settings: Readonly<Record<string, string>>;
  /** Why the server refuses writes (a standby in recovery, `read_only`), or undefined when it accepts them. */
  readonly readOnly: string | undefined;
  /**
   * Whether the guard's statements run inside a transaction that outlives them (a Kysely
   * transaction passed as `database`, a connection with autocommit off): their lock rows are then
   * invisible to the other replicas until that transaction ends, and PostgreSQL's `now()` stands
   * still. Undefined where it cannot be read.
   */
  readonly insideTransaction: boolean | undefined;
  /**
   * Whether the connections go through a pooler that hands each transaction a different server
   * session (PgBouncer in transaction mode). Undefined where the dialect cannot tell (no pool of
   * the driver's to test with) or has no such poolers.
   */
  readonly transactionPooling: boolean | undefined;
  /** The replication or cluster the server is part of, when it says so. */
  readonly cluster: ClusterFacts | undefined;
}

export interface ClusterFacts {
  /**
   * `galera`: MariaDB Galera (multi-primary, certification at commit); `group-replication`: MySQL
   * group replication; `streaming-standbys`: a PostgreSQL primary with standbys attached.
   */
  readonly kind: 'galera' | 'group-replication' | 'streaming-standbys';
  /** Nodes (or standbys) the server counts. */
  readonly members: number;
  /** Whether the node accepts the guard's statements now (Galera's `wsrep_ready`). */
  readonly ready: boolean;
  /** PostgreSQL: whether every standby confirms commits synchronously; undefined elsewhere or unknown. */
  readonly synchronous: boolean | undefined;
  /** The server's own words: status variables, replication states. */
  readonly detail: string;
}
