import { sql, type Kysely, type TableMetadata } from 'kysely';
import type { ColumnTypes, MigrationLeaseSql, TableNames } from '../../core/dialect.js';
import { tablesOfColumns } from '../common/kysely.js';
import { quotedTable } from '../common/quote.js';
import { createHash } from 'node:crypto';

/**
 * Names are bytes (VARBINARY, 255 four-byte characters) because MySQL's `_bin` collations ignore
 * trailing spaces: 'job' and 'job ' would share a lock. Times are DATETIME(3) filled from
 * UTC_TIMESTAMP(3), never TIMESTAMP, which is read in the session's zone and jumps at DST.
 */
export const mysqlColumnTypes: ColumnTypes = {
  jobName: 'varbinary(1020)',
  timestamp: 'datetime(3)',
  lockedBy: 'varchar(255)',
  token: 'char(36)',
  status: 'varchar(16)',
  bigint: 'bigint',
  boolean: 'boolean',
  text: 'text',
};

export const mysqlCreateTableSuffix = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4';

/** Whether the current database's `table` has `index` (MySQL 8.0 has no CREATE INDEX IF NOT EXISTS). */
export async function mysqlIndexExists(db: Kysely<unknown>, table: string, index: string): Promise<boolean> {
  const { rows } = await sql`SELECT 1 FROM information_schema.statistics
    WHERE table_schema = DATABASE() AND table_name = ${table} AND index_name = ${index} LIMIT 1`.execute(db);
  return rows.length > 0;
}

interface ColumnRow {
  table_name: string;
  table_schema: string;
  table_type: string | null;
  column_name: string;
  data_type: string;
  is_nullable: string;
  extra: string;
  column_default: string | null;
  column_comment: string;
}

/**
 * The tables among `names` in the current database, with their columns, in the shape of Kysely's
 * introspector. Kysely's own (MysqlIntrospector.getTables) reads every column of every table in
 * the database: MariaDB opens each table's definition for it, so one read took ~0.6 s beside 280
 * tables, Kysely's migrator reads it several times per `migrate()`, and replicas migrating at
 * once wait for each other's (8 processes took over a minute in CI's shared test database).
 */
export async function mysqlFindTables(
  db: Kysely<unknown>,
  _schema: string | undefined,
  names: readonly string[],
): Promise<TableMetadata[]> {
  if (names.length === 0) return [];
  // One SELECT per name, joined by UNION ALL, each filtered by `TABLE_SCHEMA = DATABASE()` and
  // `TABLE_NAME = ?`: with both equalities MariaDB opens that one table's definition ("Scanned 0
  // databases" in EXPLAIN); an IN list or a join to information_schema.tables makes it scan the
  // whole database. The table type comes from a subquery with the same two equalities, for that
  // reason. MySQL 8.0 reads its data dictionary either way.
  const perName = names.map(
    (name) => sql`SELECT c.TABLE_NAME AS table_name, c.TABLE_SCHEMA AS table_schema,
        (SELECT t.TABLE_TYPE FROM information_schema.tables t WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = ${name}) AS table_type,
        c.COLUMN_NAME AS column_name, c.DATA_TYPE AS data_type, c.IS_NULLABLE AS is_nullable, c.EXTRA AS extra,
        c.COLUMN_DEFAULT AS column_default, c.COLUMN_COMMENT AS column_comment, c.ORDINAL_POSITION AS position
      FROM information_schema.columns c WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME = ${name}`,
  );
  const { rows } = await sql<ColumnRow>`${sql.join(perName, sql` UNION ALL `)} ORDER BY table_name, position`.execute(db);
  return tablesOfColumns(
    rows.map((row) => ({
      table: { name: row.table_name, schema: row.table_schema, isView: row.table_type === 'VIEW' },
      column: {
        name: row.column_name,
        dataType: row.data_type,
        isNullable: row.is_nullable === 'YES',
        isAutoIncrementing: row.extra.toLowerCase().includes('auto_increment'),
        hasDefaultValue: row.column_default !== null,
        ...(row.column_comment === '' ? {} : { comment: row.column_comment }),
      },
    })),
  );
}

const table = (tables: TableNames) => sql.raw(quotedTable(tables, 'migrationLease', '`'));

/**
 * The migration lease on MySQL/MariaDB (core/dialect.ts `MigrationLeaseSql`): a row, so that on
 * Galera it replicates to every node, where GET_LOCK holds on one node only. Times are
 * UTC_TIMESTAMP(3) into DATETIME(3), as every other time of the guard's (docs/schema.md).
 */
export const mysqlMigrationLease: MigrationLeaseSql = {
  // The row is seeded (expired) apart from the take: an INSERT ... ON DUPLICATE KEY UPDATE take
  // would report 1 affected row both for an insert and, under CLIENT_FOUND_ROWS (mysql2's
  // default), for an untouched row, so a loser could not tell it lost. The seed changes nothing
  // when the row exists (`id = id`). Racing CREATEs or seeds on Galera fail at certification with a
  // deadlock (1213) or 1050, which isMigrationRace retries.
  create: (tables) => [
    sql`CREATE TABLE IF NOT EXISTS ${table(tables)} (
      id INT PRIMARY KEY,
      holder CHAR(36) NULL,
      expires_at DATETIME(3) NOT NULL
    ) ${sql.raw(mysqlCreateTableSuffix)}`,
    sql`INSERT INTO ${table(tables)} (id, holder, expires_at) VALUES (1, NULL, '1970-01-02 00:00:00.000')
      ON DUPLICATE KEY UPDATE id = id`,
  ],
  // One UPDATE on the row: with or without CLIENT_FOUND_ROWS its affected count is 1 exactly when
  // the WHERE held (the token is new, so a match always changes the row). On Galera two nodes may
  // both match locally; certification lets one commit and fails the other with a deadlock, which
  // the taker counts as lost.
  take: (tables, token, ttlMs) => sql`UPDATE ${table(tables)}
    SET holder = ${token}, expires_at = UTC_TIMESTAMP(3) + INTERVAL ${ttlMs * 1_000} MICROSECOND
    WHERE id = 1 AND (holder IS NULL OR expires_at < UTC_TIMESTAMP(3))`,
  renew: (tables, token, ttlMs) => sql`UPDATE ${table(tables)}
    SET expires_at = UTC_TIMESTAMP(3) + INTERVAL ${ttlMs * 1_000} MICROSECOND
    WHERE id = 1 AND holder = ${token}`,
  release: (tables, token) => sql`UPDATE ${table(tables)} SET holder = NULL WHERE id = 1 AND holder = ${token}`,
};

/**
 * The stored procedure of migration 006, by version: a later change to its body gets a new name
 * (in a new migration), so that the replicas of a rolling deploy each keep calling the body they
 * were written for.
 */
const TAKE_PROCEDURE_SUFFIX = 'take_locks_v1';
/** MySQL's and MariaDB's longest routine name. */
const MAX_ROUTINE_NAME = 64;

/**
 * The procedure's name: the table prefix, the version, and the first 8 hex digits of the SHA-256
 * of the exact prefix (`cronguard_take_locks_v1_e10dce7a`). Table names are case-sensitive on
 * Linux, routine names never are: without the hash, the apps of prefixes `app_` and `APP_` called
 * one procedure, on the tables of whichever migrated first (cronguard 0.2.0 named it
 * `<prefix>take_locks_v1`; replicas of 0.2.0 still call that one, which migrate() leaves in place).
 * A prefix too long for the whole is cut; the hash still tells it apart.
 */
export function takeProcedureName(tables: TableNames): string {
  const prefix = tables.locks.slice(0, -'locks'.length);
  const hash = createHash('sha256').update(prefix, 'utf8').digest('hex').slice(0, 8);
  const tail = `${TAKE_PROCEDURE_SUFFIX}_${hash}`;
  return `${prefix.slice(0, MAX_ROUTINE_NAME - tail.length)}${tail}`;
}

/**
 * The requests as rows `j`, from the JSON array `source` (an SQL expression: the procedure's
 * parameter, or `?`) that lock-store.ts writes: `i` its position from 1, `n` the name and `t` the
 * token (as bytes, compared byte for byte), `s` the slot (absent: none), `u` and `m` lockAtMostFor
 * in microseconds and milliseconds.
 */
function requestRows(source: string): string {
  return `JSON_TABLE(${source}, '$[*]' COLUMNS (i FOR ORDINALITY, name VARBINARY(1020) PATH '$.n', token VARBINARY(36) PATH '$.t',
      slot DATETIME(3) PATH '$.s', micros BIGINT PATH '$.u', ms BIGINT PATH '$.m')) AS j`;
}

/**
 * The take of many jobs in one call (migration 006; lock-store.ts calls it through
 * batch-acquire.ts). MySQL has no RETURNING and no multi-statement calls with bound values, so
 * without it a batch's take is four round trips (BEGIN, the take, the run rows, COMMIT), each
 * waiting for the answer to the one before: the procedure is one, with the very same statements.
 *
 * - Its input is one JSON array of the jobs to take (`n` name, `t` token, `s` slot or absent,
 *   `u` lockAtMostFor in microseconds, `m` in milliseconds), bound as one value: the statement text
 *   is the same for any number of jobs, prepared once per connection, and no value is SQL text.
 *   Names and tokens are read as bytes (VARBINARY), compared byte for byte as everywhere else.
 * - In one transaction, rolled back when any statement fails (the error goes back as it was: a
 *   deadlock victim is sent again, anything else has each job sent alone): for each job in name
 *   order, the one-job take (lock-store.ts), so that two batches lock their rows in the same order
 *   and never wait for each other in a circle; then every winner's run row, and `abandoned` for
 *   the run each took over from, in one INSERT … SELECT (the one-job start for many), which
 *   reads the lock rows from the input by primary key (STRAIGHT_JOIN, FORCE INDEX: an INSERT …
 *   SELECT locks the rows it reads, and on a small table the optimizer would rather scan them
 *   all, locking rows another call holds: two calls of disjoint jobs then deadlocked); then, for
 *   every job by its position in the input (`i`, from 1), what its row says now, with the batch
 *   probe's CASE plus `mine` (this call's token: a win). A loser writes nothing.
 * - SQL SECURITY INVOKER: it runs with the caller's privileges on the tables, not its creator's.
 * - Valid on MySQL 8.0 and MariaDB 10.6+ (JSON_TABLE); no double-quoted strings, so that the
 *   server's sql_mode at creation (which the procedure keeps) may include ANSI_QUOTES.
 */
export function takeProcedureSql(tables: TableNames): string {
  const locks = `\`${tables.locks}\``;
  const runs = `\`${tables.runs}\``;
  return `CREATE PROCEDURE \`${takeProcedureName(tables)}\`(
  IN requests LONGTEXT CHARACTER SET utf8mb4, IN locked_by_value VARCHAR(255) CHARACTER SET utf8mb4, IN with_history BOOLEAN)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE done BOOLEAN DEFAULT FALSE;
  DECLARE v_name VARBINARY(1020);
  DECLARE v_token VARBINARY(36);
  DECLARE v_slot DATETIME(3);
  DECLARE v_micros BIGINT;
  DECLARE wanted CURSOR FOR
    SELECT j.name, j.token, j.slot, j.micros
      FROM ${requestRows('requests')}
     ORDER BY j.name;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = TRUE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  OPEN wanted;
  takes: LOOP
    FETCH wanted INTO v_name, v_token, v_slot, v_micros;
    IF done THEN LEAVE takes; END IF;
    UPDATE ${locks}
       SET previous_token = token, lock_until = UTC_TIMESTAMP(3) + INTERVAL v_micros MICROSECOND,
           locked_at = UTC_TIMESTAMP(3), locked_by = locked_by_value, token = v_token, last_slot = COALESCE(v_slot, last_slot)
     WHERE name = v_name AND lock_until <= UTC_TIMESTAMP(3) AND (paused_at IS NULL OR paused_until <= UTC_TIMESTAMP(3))
       AND (v_slot IS NULL OR last_slot IS NULL OR last_slot < v_slot);
  END LOOP;
  CLOSE wanted;
  IF with_history THEN
    INSERT INTO ${runs} (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
    SELECT l.token, l.name, j.slot, 'running', l.locked_by, l.locked_at, j.ms, l.lock_until
      FROM ${requestRows('requests')}
      STRAIGHT_JOIN ${locks} l FORCE INDEX (PRIMARY) ON l.name = j.name AND l.token = j.token
    UNION ALL
    SELECT r.id, r.job_name, r.slot, r.status, r.locked_by, r.started_at, r.lock_at_most_for_ms, r.lock_until
      FROM ${requestRows('requests')}
      STRAIGHT_JOIN ${locks} l FORCE INDEX (PRIMARY) ON l.name = j.name AND l.token = j.token
      STRAIGHT_JOIN ${runs} r FORCE INDEX (PRIMARY) ON r.id = l.previous_token
     WHERE r.status = 'running'
    ON DUPLICATE KEY UPDATE status = 'abandoned';
  END IF;
  ${takeStatesSql(tables, 'requests')};
  COMMIT;
END`;
}

/**
 * What each request's lock row says, by its position in the JSON array `requests` (an SQL
 * expression: the procedure's parameter, or `?`): the batch probe's CASE (batch-acquire.ts) plus
 * `mine` (the request's token: a win). A plain read: the procedure ends with it, and lock-store.ts
 * sends it alone after a call that ended without giving every state (a deadlock, an answer of
 * another shape).
 * `locking`: the read lock-store.ts sends after a call whose connection was lost, which may still
 * be committing: `LOCK IN SHARE MODE` waits for the row locks that call holds. Each lock row by
 * its primary key (FORCE INDEX: on a small table the optimizer would rather scan, share-locking every
 * row), in the order of the array, which the caller sorts by name as the takes lock theirs.
 * The procedure's text (the plain read) is unchanged by it.
 */
export function takeStatesSql(tables: TableNames, requests: string, { locking = false } = {}): string {
  return `SELECT j.i, CASE WHEN l.name IS NULL THEN 'missing' WHEN l.token = j.token THEN 'mine'
              WHEN l.paused_at IS NOT NULL AND (l.paused_until IS NULL OR l.paused_until > UTC_TIMESTAMP(3)) THEN 'paused'
              WHEN l.last_slot >= j.slot THEN 'slot-done' WHEN l.lock_until > UTC_TIMESTAMP(3) THEN 'locked' ELSE 'free' END AS state
    FROM ${requestRows(requests)}
    LEFT JOIN \`${tables.locks}\` l${locking ? ' FORCE INDEX (PRIMARY)' : ''} ON l.name = j.name${locking ? ' LOCK IN SHARE MODE' : ''}`;
}

/** Access denied: to the database (1044), a table (1142), a privilege such as CREATE ROUTINE (1227), a routine (1370). */
const ACCESS_DENIED = new Set([1044, 1142, 1227, 1370]);
const ALREADY_EXISTS = 1304;

/**
 * Migration 006 on MySQL/MariaDB, and every `migrate()` after it: creates the take procedure unless
 * it exists (MySQL 8.0 before 8.0.29 has no CREATE PROCEDURE IF NOT EXISTS). A user without the
 * CREATE ROUTINE privilege still migrates: the procedure is then left out (its name returned), the replicas take their
 * batches with four statements, as before 006, and a later `migrate()` by a user who has the
 * privilege creates it. A procedure of that name (compared without case, as the server does) that
 * reads other tables is refused (takeProcedureOwner). Any other failure fails the migration.
 */
export async function createMysqlTakeProcedure(db: Kysely<unknown>, tables: TableNames): Promise<string[]> {
  if (await takeProcedureOwner(db, tables)) return [];
  try {
    await sql.raw(takeProcedureSql(tables)).execute(db);
  } catch (error) {
    const errno = (error as { errno?: unknown }).errno as number;
    // Created meanwhile by another replica's migrate() (ER_SP_ALREADY_EXISTS): done, once it is ours.
    if (errno === ALREADY_EXISTS) await takeProcedureOwner(db, tables);
    // Left out: migrate() says so, with what it costs and the GRANT that mends it.
    else if (ACCESS_DENIED.has(errno)) return [takeProcedureName(tables)];
    else throw error;
  }
  return [];
}

/**
 * Whether the take procedure exists; throws when a procedure of its name is another prefix's. The
 * server matches routine names without case (so does this read, information_schema's collation);
 * its body names its tables exactly, in backquotes. A user who may not read the body (NULL) is
 * trusted: the name is the prefix's own, hash included.
 */
async function takeProcedureOwner(db: Kysely<unknown>, tables: TableNames): Promise<boolean> {
  const name = takeProcedureName(tables);
  const { rows } = await sql<{ name: string; definition: string | null }>`SELECT routine_name AS name, routine_definition AS definition
    FROM information_schema.routines
    WHERE routine_schema = DATABASE() AND routine_name = ${name} AND routine_type = 'PROCEDURE'`.execute(db);
  const [existing] = rows;
  if (existing === undefined) return false;
  if (existing.definition === null || existing.definition.includes(`\`${tables.locks}\``)) return true;
  throw new Error(
    `The stored procedure \`${existing.name}\` has the name of the take procedure of \`${tables.locks}\` (routine names ignore case) ` +
      `but reads other tables. Give this app a tablePrefix that is not another app's with other case, ` +
      `or DROP PROCEDURE \`${existing.name}\` if no app calls it, then migrate again.`,
  );
}
