import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { toDate } from './run-record.js';
import { migrationNumber } from '../../migrations/index.js';
import { readSchemaVersions } from './versions.js';

/** A job's schedule as a replica declares it. */
export interface JobSchedule {
  readonly name: string;
  readonly expression: string;
  /** The IANA time zone of the expression; null for the declaring process's own. */
  readonly timezone: string | null;
  readonly lockAtMostForMs: number;
  readonly lockAtLeastForMs: number;
  /** The `catchUp` window in ms; null without catch-up. */
  readonly catchUpMs: number | null;
  /** The `spread` window in ms; null (or absent) without spread. */
  readonly spreadMs?: number | null;
}

/** A row of `<prefix>jobs`, read on the database's clock. */
export interface DeclaredSchedule extends JobSchedule {
  /** The `spread` window in ms; null without spread, and on tables before migration 008, which do not keep it. */
  readonly spreadMs: number | null;
  readonly declaredBy: string;
  /** The last time a replica declared it. */
  readonly declaredAt: Date;
  /** When its expression or time zone last changed: its slots are expected from then on. */
  readonly changedAt: Date;
}

interface ScheduleRow {
  name: string;
  cron_expression: string;
  time_zone: string | null;
  lock_at_most_for_ms: number | string;
  lock_at_least_for_ms: number | string;
  catch_up_ms: number | string | null;
  spread_ms?: number | string | null;
  declared_by: string;
  declared_at: Date | string;
  changed_at: Date | string;
}

/**
 * At most this many schedules per declaring statement: 8 bound values each, far below every
 * server's limit on the values of one statement (SQLite's 32,766; 65,535 on the others).
 */
export const DECLARE_ROWS_PER_STATEMENT = 500;

/** Attempts of one declaring statement, and the most a retry waits before it (a random part of it). */
const DECLARE_ATTEMPTS = 4;
const DECLARE_RETRY_MAX_WAIT_MS = 250;

/** The migration that brings `spread_ms` to `<prefix>jobs`. */
const SPREAD_SCHEMA_VERSION = migrationNumber('008_spread');
/** While the tables are older than 008, how often the schema version is read again (declaring and reading are not hot paths). */
const SPREAD_RECHECK_MS = 60_000;

/** The jobs table of one guard: declaring schedules (an upsert) and reading them. Not a hot path. */
export function createScheduleStore(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const jobs = sql.raw(quotedTable(tables, 'jobs', dialect.quote));
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  const reads = dialect.reads;
  const now = sql.raw(reads.now);
  const columnsOf = (spread: boolean) =>
    sql.raw(
      [
        `${reads.name('name')} AS name`,
        'cron_expression',
        'time_zone',
        'lock_at_most_for_ms',
        'lock_at_least_for_ms',
        'catch_up_ms',
        ...(spread ? ['spread_ms'] : []),
        'declared_by',
        `${reads.time('declared_at')} AS declared_at`,
        `${reads.time('changed_at')} AS changed_at`,
      ].join(', '),
    );

  /**
   * Whether the tables have `spread_ms` (migration 008): read once, and again a minute later while
   * they do not. Tables before 008 are declared and read without it (the statements of 0.x before
   * `spread`): a job's spread is then not known to the ledger, which may count its runs late, until
   * `cronguard migrate` has run. A read that fails counts as no column (the statement that follows
   * says what is wrong).
   */
  let spreadKnown = false;
  let spreadCheckedAt = Number.NEGATIVE_INFINITY;
  async function hasSpreadColumn(): Promise<boolean> {
    if (spreadKnown || performance.now() - spreadCheckedAt < SPREAD_RECHECK_MS) return spreadKnown;
    spreadCheckedAt = performance.now();
    try {
      // Migrations only go forward: once there, the column stays.
      spreadKnown = (await readSchemaVersions(db, dialect, tables)).database >= SPREAD_SCHEMA_VERSION;
    } catch {
      spreadKnown = false;
    }
    return spreadKnown;
  }

  /**
   * One upsert for many declarations, on the database's clock. `changed_at` moves only when the
   * expression or the time zone changed (null-safe comparisons), so that the ledger expects the
   * new schedule's slots from the deploy that changed it, not before. Multi-row: the assignments
   * read each row's own proposed values (`excluded`, `VALUES()`).
   */
  function upsert(schedules: readonly JobSchedule[], declaredBy: string, spread: boolean) {
    // `spread_ms` only on tables that have it (migration 008): older tables get the statement they always had.
    const values = sql.join(
      schedules.map(({ name, expression, timezone, lockAtMostForMs, lockAtLeastForMs, catchUpMs, spreadMs }) =>
        spread
          ? sql`(${name}, ${expression}, ${timezone}, ${lockAtMostForMs}, ${lockAtLeastForMs}, ${catchUpMs}, ${spreadMs ?? null}, ${declaredBy}, ${now}, ${now})`
          : sql`(${name}, ${expression}, ${timezone}, ${lockAtMostForMs}, ${lockAtLeastForMs}, ${catchUpMs}, ${declaredBy}, ${now}, ${now})`,
      ),
    );
    const spreadColumn = sql.raw(spread ? ' spread_ms,' : '');
    const insert = sql`INSERT INTO ${jobs} (name, cron_expression, time_zone, lock_at_most_for_ms, lock_at_least_for_ms, catch_up_ms,${spreadColumn} declared_by, declared_at, changed_at) VALUES ${values}`;
    if (dialect.name === 'mysql') {
      const spreadSet = sql.raw(spread ? ' spread_ms = VALUES(spread_ms),' : '');
      // Assignments run left to right: changed_at compares the old expression before it is replaced.
      return sql`${insert} ON DUPLICATE KEY UPDATE
        changed_at = IF(cron_expression <=> VALUES(cron_expression) AND time_zone <=> VALUES(time_zone), changed_at, VALUES(changed_at)),
        cron_expression = VALUES(cron_expression), time_zone = VALUES(time_zone),
        lock_at_most_for_ms = VALUES(lock_at_most_for_ms), lock_at_least_for_ms = VALUES(lock_at_least_for_ms),
        catch_up_ms = VALUES(catch_up_ms),${spreadSet} declared_by = VALUES(declared_by), declared_at = VALUES(declared_at)`;
    }
    const spreadSet = sql.raw(spread ? ' spread_ms = excluded.spread_ms,' : '');
    // PostgreSQL and SQLite share ON CONFLICT; IS DISTINCT FROM is spelled IS NOT in SQLite.
    const distinct = dialect.name === 'sqlite' ? sql.raw('IS NOT') : sql.raw('IS DISTINCT FROM');
    return sql`${insert} ON CONFLICT (name) DO UPDATE SET
        changed_at = CASE WHEN ${jobs}.cron_expression ${distinct} excluded.cron_expression OR ${jobs}.time_zone ${distinct} excluded.time_zone
                          THEN excluded.changed_at ELSE ${jobs}.changed_at END,
        cron_expression = excluded.cron_expression, time_zone = excluded.time_zone,
        lock_at_most_for_ms = excluded.lock_at_most_for_ms, lock_at_least_for_ms = excluded.lock_at_least_for_ms,
        catch_up_ms = excluded.catch_up_ms,${spreadSet} declared_by = excluded.declared_by, declared_at = excluded.declared_at`;
  }

  /**
   * `attempt`, made again after a failure that is not a missing table, up to DECLARE_ATTEMPTS times.
   * Replicas that start together declare the same rows at the same instant: in name order InnoDB
   * never deadlocks them on one server, but on Galera each node takes its rows locally and the
   * cluster's certification rolls back all but the first writer of a row at COMMIT, with a deadlock
   * error (1213). The upsert is idempotent and was rolled back: sent again after a random wait (so
   * that the replicas do not collide again), it declares. A missing table is not retried: the
   * caller says to migrate.
   */
  async function declaredAgainIfRolledBack(attempt: () => Promise<unknown>): Promise<void> {
    for (let made = 1; ; made += 1) {
      try {
        await attempt();
        return;
      } catch (error) {
        if (dialect.isMissingTable(error) || made >= DECLARE_ATTEMPTS) throw error;
        await sleep(Math.random() * DECLARE_RETRY_MAX_WAIT_MS);
      }
    }
  }

  return {
    /**
     * Declares schedules: one statement for up to DECLARE_ROWS_PER_STATEMENT of them, so that a
     * replica that schedules N jobs sends one upsert at start and one an hour, not N at once. In
     * name order, so that replicas declaring the same jobs at the same instant lock the rows in
     * the same order and never wait for each other in a circle. A name given twice is declared
     * as given last (one statement may not upsert a row twice). A statement the server refuses is
     * sent again row by row (unless its table is missing), so that one bad row fails alone; the
     * first refusal is thrown once every row had its try.
     */
    async declare(schedules: readonly JobSchedule[], declaredBy: string): Promise<void> {
      const byName = new Map(schedules.map((schedule) => [schedule.name, schedule]));
      const sorted = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const failed: unknown[] = [];
      const spread = await hasSpreadColumn();
      for (let from = 0; from < sorted.length; from += DECLARE_ROWS_PER_STATEMENT) {
        const batch = sorted.slice(from, from + DECLARE_ROWS_PER_STATEMENT);
        // Sent again when the server rolled it back (a deadlock, a Galera certification conflict).
        const error = await declaredAgainIfRolledBack(() => upsert(batch, declaredBy, spread).execute(db)).then(
          () => undefined,
          (refused: unknown) => refused,
        );
        if (error === undefined) continue;
        if (batch.length === 1 || dialect.isMissingTable(error)) {
          failed.push(error);
          continue;
        }
        // One row the server refuses fails the whole statement: each alone, so that only its own fails.
        for (const one of batch) {
          await declaredAgainIfRolledBack(() => upsert([one], declaredBy, spread).execute(db)).catch((refused: unknown) =>
            failed.push(refused),
          );
        }
      }
      // The first refusal, once every other row had its own chance.
      if (failed.length > 0) throw failed[0];
    },
    /** Every declared schedule, or one job's. */
    async list(job?: string): Promise<DeclaredSchedule[]> {
      const where = job === undefined ? sql`` : sql`WHERE name = ${job}`;
      const columns = columnsOf(await hasSpreadColumn());
      const { rows } = await sql<ScheduleRow>`SELECT ${columns} FROM ${jobs} ${where} ORDER BY name`.execute(db);
      return rows.map(toSchedule);
    },
    /**
     * The schedules of the jobs named (a page of the dashboard's overview): a primary-key lookup
     * per name, the names bound one each; callers pass a page (at most DASHBOARD_PAGE_JOBS), so
     * that the statement never grows with the number of jobs in the table.
     */
    async listOf(names: readonly string[]): Promise<DeclaredSchedule[]> {
      if (names.length === 0) return [];
      const columns = columnsOf(await hasSpreadColumn());
      const { rows } = await sql<ScheduleRow>`SELECT ${columns} FROM ${jobs}
        WHERE name IN (${sql.join([...names])}) ORDER BY name`.execute(db);
      return rows.map(toSchedule);
    },
    /** The newest slot that ran (the lock row's watermark), or null: for catch-up at start. */
    async lastSlot(job: string): Promise<Date | null> {
      const { rows } = await sql<{
        slot: Date | string | null;
      }>`SELECT ${sql.raw(reads.time('last_slot'))} AS slot FROM ${locks} WHERE name = ${job}`.execute(db);
      const slot = rows[0]?.slot;
      return slot === undefined || slot === null ? null : toDate(slot);
    },
  };
}

export type ScheduleStore = ReturnType<typeof createScheduleStore>;

function toSchedule(row: ScheduleRow): DeclaredSchedule {
  return {
    name: row.name,
    expression: row.cron_expression,
    timezone: row.time_zone,
    lockAtMostForMs: Number(row.lock_at_most_for_ms),
    lockAtLeastForMs: Number(row.lock_at_least_for_ms),
    catchUpMs: row.catch_up_ms === null ? null : Number(row.catch_up_ms),
    spreadMs: row.spread_ms === undefined || row.spread_ms === null ? null : Number(row.spread_ms),
    declaredBy: row.declared_by,
    declaredAt: toDate(row.declared_at),
    changedAt: toDate(row.changed_at),
  };
}
