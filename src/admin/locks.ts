import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { toDate } from './run-record.js';

/** One row of `<prefix>locks`, read on the database's clock. */
export interface LockRecord {
  readonly name: string;
  /** `held` until `lockUntil`, `free` after. */
  readonly state: 'held' | 'free';
  /** Who took it last. */
  readonly lockedBy: string;
  readonly lockedAt: Date;
  readonly lockUntil: Date;
  /** Milliseconds until the lock is free; 0 once it is. */
  readonly remainingMs: number;
  /** An execution holds it and has not released it (false while only lockAtLeastFor keeps it). */
  readonly running: boolean;
  /**
   * The cronguard version of the replica that took it last (`lockedBy`), as that replica recorded it;
   * null when it recorded none: it runs a version before 0.2.0, or the tables are not migrated.
   */
  readonly version: string | null;
  /** The operator's pause in force (`guard.pause`), or null; a pause whose `until` has passed is null. */
  readonly paused: {
    readonly until: Date | null;
    readonly reason: string | null;
    readonly by: string;
    readonly at: Date;
  } | null;
  /** A "run now" request no replica has run yet (`guard.trigger`), or null. */
  readonly pendingTrigger: { readonly by: string; readonly at: Date; readonly force: boolean } | null;
}

/** Who asked for an unlock or a forget, for the audit in `<prefix>controls`. */
export interface UnlockAudit {
  readonly by: string;
  readonly reason: string | null;
}

/** The holding an unlock freed. */
export interface UnlockedLock {
  readonly lockedBy: string;
  /** The run (its token, the id of its history row) that held the lock; null on rows before 0.1.0's tokens. */
  readonly run: string | null;
}

interface LockRow {
  name: string;
  locked_by: string;
  locked_at: Date | string;
  lock_until: Date | string;
  remaining_ms: number | string;
  token: string | null;
  paused_now: number | string | boolean;
  paused_until: Date | string | null;
  paused_reason: string | null;
  paused_by: string | null;
  paused_at: Date | string | null;
  trigger_id: string | null;
  trigger_by: string | null;
  trigger_at: Date | string | null;
  trigger_force: boolean | number | null;
}

export function createLockReader(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  const controls = sql.raw(quotedTable(tables, 'controls', dialect.quote));
  const jobs = sql.raw(quotedTable(tables, 'jobs', dialect.quote));
  const reads = dialect.reads;
  const lockColumns = [
    `${reads.name('name')} AS name`,
    'locked_by',
    `${reads.time('locked_at')} AS locked_at`,
    `${reads.time('lock_until')} AS lock_until`,
    `${reads.millisecondsUntil('lock_until')} AS remaining_ms`,
    'token',
  ];
  const columns = sql.raw(
    [
      ...lockColumns,
      // Whether the pause is in force, on the database's clock, as the acquire statements decide it.
      `CASE WHEN paused_at IS NOT NULL AND (paused_until IS NULL OR paused_until > ${reads.now}) THEN 1 ELSE 0 END AS paused_now`,
      `${reads.time('paused_until')} AS paused_until`,
      'paused_reason',
      'paused_by',
      `${reads.time('paused_at')} AS paused_at`,
      'trigger_id',
      'trigger_by',
      `${reads.time('trigger_at')} AS trigger_at`,
      'trigger_force',
    ].join(', '),
  );
  // On tables before migration 004: no pause, no trigger (what the acquire statements read there too).
  const controlColumns = [
    'paused_until',
    'paused_reason',
    'paused_by',
    'paused_at',
    'trigger_id',
    'trigger_by',
    'trigger_at',
    'trigger_force',
  ];
  const columnsBeforeControls = sql.raw(
    [...lockColumns, '0 AS paused_now', ...controlColumns.map((column) => `NULL AS ${column}`)].join(', '),
  );
  // Frees a lock by hand: expires it now, on the database's clock. The token stays, so that the
  // next taker still finds the run it takes over from and marks it abandoned if it is running.
  const now = sql.raw(reads.now);

  const databaseNow = sql.raw(`${reads.time(reads.now)} AS now`);

  return {
    /** The database's clock. */
    async now(): Promise<Date> {
      const { rows } = await sql<{ now: Date | string }>`SELECT ${databaseNow}`.execute(db);
      const now = rows[0]?.now;
      if (now === undefined) throw new Error('the database returned no time');
      return toDate(now);
    },
    /**
     * `controls`: the tables have migration 004's columns. `names`: only these rows (a page of the
     * dashboard, at most a few dozen names, each bound: primary-key lookups); else every row.
     */
    async list(controls: boolean, names?: readonly string[]): Promise<Omit<LockRecord, 'version'>[]> {
      if (names !== undefined && names.length === 0) return [];
      const where = names === undefined ? sql`` : sql`WHERE name IN (${sql.join([...names])})`;
      const { rows } =
        await sql<LockRow>`SELECT ${controls ? columns : columnsBeforeControls} FROM ${locks} ${where} ORDER BY name`.execute(db);
      return rows.map((row) => {
        const remaining = Number(row.remaining_ms);
        return {
          name: row.name,
          state: remaining > 0 ? 'held' : 'free',
          lockedBy: row.locked_by,
          lockedAt: toDate(row.locked_at),
          lockUntil: toDate(row.lock_until),
          remainingMs: Math.max(remaining, 0),
          running: row.token !== null && remaining > 0,
          paused:
            Number(row.paused_now) === 1 && row.paused_at !== null
              ? {
                  until: row.paused_until === null ? null : toDate(row.paused_until),
                  reason: row.paused_reason,
                  by: row.paused_by ?? '',
                  at: toDate(row.paused_at),
                }
              : null,
          pendingTrigger:
            row.trigger_id === null || row.trigger_at === null
              ? null
              : { by: row.trigger_by ?? '', at: toDate(row.trigger_at), force: Boolean(Number(row.trigger_force)) },
        };
      });
    },
    /**
     * Frees a held lock, and says whose it was. `audit`: the tables have the controls table
     * (migration 004), where the unlock is recorded with who asked, whose lock and which run, in the
     * same transaction: an unlock is the one control that can let two runs overlap.
     */
    async unlock(name: string, audit: UnlockAudit | undefined): Promise<UnlockedLock | undefined> {
      return db.transaction().execute(async (trx) => {
        // Who holds it now; the UPDATE then frees exactly that holding (its token), so that the
        // audit names the run that was freed and not one that took the lock in between.
        const { rows } = await sql<{ locked_by: string; token: string | null }>`SELECT locked_by, token FROM ${locks}
          WHERE name = ${name} AND lock_until > ${now}`.execute(trx);
        const holder = rows[0];
        if (holder === undefined) return undefined;
        const sameToken = holder.token === null ? sql`token IS NULL` : sql`token = ${holder.token}`;
        const result = await sql`UPDATE ${locks} SET lock_until = ${now}
          WHERE name = ${name} AND lock_until > ${now} AND ${sameToken}`.execute(trx);
        if (result.numAffectedRows !== 1n) return undefined;
        const unlocked = { lockedBy: holder.locked_by, run: holder.token };
        if (audit !== undefined) {
          const what = `freed the lock of ${unlocked.lockedBy}${unlocked.run === null ? '' : `, run ${unlocked.run}`}`;
          await sql`INSERT INTO ${controls} (id, job_name, action, actor, reason, pause_until, changed_at)
            VALUES (${randomUUID()}, ${name}, 'unlock', ${audit.by}, ${audit.reason === null ? what : `${audit.reason} (${what})`}, NULL, ${now})`.execute(
            trx,
          );
        }
        return unlocked;
      });
    },

    /**
     * Deletes a job's lock row and its declared schedule, for a job no replica runs any more (a
     * typo's row, a retired job): it leaves `locks`, `doctor`, `slots` and the dashboard. Refused
     * (`'held'`) while its lock is held. Its history stays. Recorded like `unlock`.
     */
    async forget(name: string, audit: UnlockAudit | undefined, schedules: boolean): Promise<'forgotten' | 'held' | 'unknown'> {
      return db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ held: number | boolean }>`SELECT CASE WHEN lock_until > ${now} THEN 1 ELSE 0 END AS held
          FROM ${locks} WHERE name = ${name}`.execute(trx);
        if (rows[0] !== undefined && Number(rows[0].held) === 1) return 'held';
        const lock = await sql`DELETE FROM ${locks} WHERE name = ${name} AND lock_until <= ${now}`.execute(trx);
        // The declared schedule (migration 005), where the tables have it.
        const schedule = schedules ? await sql`DELETE FROM ${jobs} WHERE name = ${name}`.execute(trx) : undefined;
        if (lock.numAffectedRows === 0n && (schedule?.numAffectedRows ?? 0n) === 0n) return 'unknown';
        if (audit !== undefined) {
          await sql`INSERT INTO ${controls} (id, job_name, action, actor, reason, pause_until, changed_at)
            VALUES (${randomUUID()}, ${name}, 'forget', ${audit.by}, ${audit.reason}, NULL, ${now})`.execute(trx);
        }
        return 'forgotten';
      });
    },
  };
}
