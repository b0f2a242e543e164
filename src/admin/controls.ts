import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import type { Dialect, TableNames } from '../core/dialect.js';
import { GuardError } from '../core/errors.js';
import { toDate } from './run-record.js';
import { pauseIntervals, type PauseChangeRecord, type PauseInterval } from '../core/slot-ledger.js';

/** What a control change did, in the audit (`guard.controls`, `cronguard audit`). */
export type ControlAction = 'pause' | 'resume' | 'trigger' | 'auto-pause' | 'unlock' | 'forget';

/** One row of `<prefix>controls`: who changed what on a job, when, and why. */
export interface ControlRecord {
  readonly id: string;
  readonly job: string;
  readonly action: ControlAction;
  /** The guard's `lockedBy`, or the CLI's `--by`. */
  readonly by: string;
  readonly reason: string | null;
  /** For a pause: when it lifts by itself (null: until resumed). */
  readonly until: Date | null;
  /** On the database's clock. */
  readonly at: Date;
}

/** A job's pause, as the lock row holds it. */
export interface PauseState {
  /** When it lifts by itself; null: until `resume`. */
  readonly until: Date | null;
  readonly reason: string | null;
  readonly by: string;
  readonly at: Date;
}

/** A "run now" request waiting for a replica that schedules the job. */
export interface PendingTrigger {
  readonly job: string;
  /** Matched and cleared by the one take that runs it. */
  readonly id: string;
  readonly by: string;
  /** Runs even while the job is paused. */
  readonly force: boolean;
}

/** A pause change, validated by the guard. */
export interface PauseChange {
  readonly job: string;
  readonly by: string;
  readonly reason: string | null;
  /** An instant, or a duration from now on the database's clock; null: until resumed. */
  readonly until: Date | { readonly afterMs: number } | null;
}

/**
 * The operator controls' SQL: pause, resume and trigger requests on the lock row, the audit table,
 * and the one poll a replica sends for pending requests. Admin writes, never on a job's hot path:
 * the acquire statements of each dialect read the pause themselves.
 */
export function createControlStore(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  const runs = sql.raw(quotedTable(tables, 'runs', dialect.quote));
  const controls = sql.raw(quotedTable(tables, 'controls', dialect.quote));
  const reads = dialect.reads;
  const now = sql.raw(reads.now);
  const time = (column: string): RawBuilder<unknown> => sql.raw(reads.time(column));
  // The same pause test as the acquire statements', on the database's clock.
  const pausedNow = sql.raw(`paused_at IS NOT NULL AND (paused_until IS NULL OR paused_until > ${reads.now})`);

  async function databaseNow(): Promise<Date> {
    const { rows } = await sql<{ now: Date | string }>`SELECT ${time(reads.now)} AS now`.execute(db);
    const value = rows[0]?.now;
    if (value === undefined) throw new Error('the database returned no time');
    return toDate(value);
  }

  async function audit(
    job: string,
    action: ControlAction,
    by: string,
    reason: string | null,
    until: Date | null,
    on: Kysely<unknown> = db,
  ): Promise<void> {
    await sql`INSERT INTO ${controls} (id, job_name, action, actor, reason, pause_until, changed_at)
      VALUES (${randomUUID()}, ${job}, ${action}, ${by}, ${reason}, ${until === null ? null : reads.timeParameter(until)}, ${now})`.execute(
      on,
    );
  }

  /**
   * A job's lock row, created free and never run when it has none (a job can be paused before its
   * first deploy), without failing on a concurrent creator: inside a transaction a failed INSERT
   * would abort it on PostgreSQL, so the duplicate is ignored by the statement itself.
   */
  function ensureRow(job: string, by: string) {
    const insert = sql`INSERT INTO ${locks} (name, lock_until, locked_at, locked_by) VALUES (${job}, ${now}, ${now}, ${by})`;
    return dialect.name === 'mysql' ? sql`${insert} ON DUPLICATE KEY UPDATE name = name` : sql`${insert} ON CONFLICT (name) DO NOTHING`;
  }

  async function rowExists(job: string): Promise<boolean> {
    const { rows } = await sql`SELECT 1 AS found FROM ${locks} WHERE name = ${job}`.execute(db);
    return rows.length > 0;
  }

  async function pauseState(job: string): Promise<PauseState | undefined> {
    // Aliases that are no keyword anywhere (BY, UNTIL, FORCE are, on one server or another).
    const { rows } = await sql<{
      paused_until: Date | string | null;
      paused_reason: string | null;
      paused_by: string;
      paused_at: Date | string;
    }>`
      SELECT ${time('paused_until')} AS paused_until, paused_reason, paused_by, ${time('paused_at')} AS paused_at
        FROM ${locks} WHERE name = ${job} AND ${pausedNow}`.execute(db);
    const row = rows[0];
    if (row === undefined) return undefined;
    return {
      until: row.paused_until === null ? null : toDate(row.paused_until),
      reason: row.paused_reason,
      by: row.paused_by,
      at: toDate(row.paused_at),
    };
  }

  return {
    pauseState,

    /** Pauses the job (replacing a pause in force), creating its lock row if it has none, and records it. */
    async pause(change: PauseChange): Promise<PauseState> {
      const { job, by, reason } = change;
      const at = await databaseNow();
      const until =
        change.until === null ? null : change.until instanceof Date ? change.until : new Date(at.getTime() + change.until.afterMs);
      const untilValue = until === null ? null : reads.timeParameter(until);
      const atValue = reads.timeParameter(at);
      // The pause and its audit row in one transaction: both or neither, so that the ledger never
      // shows a pause in force as missed slots, and pause() resolves once it is committed.
      await db.transaction().execute(async (trx) => {
        await ensureRow(job, by).execute(trx);
        await sql`UPDATE ${locks} SET paused_until = ${untilValue}, paused_reason = ${reason}, paused_by = ${by}, paused_at = ${atValue}
          WHERE name = ${job}`.execute(trx);
        await audit(job, 'pause', by, reason, until, trx);
      });
      return { until, reason, by, at };
    },

    /**
     * Auto-pause: pauses the job (which has a row: it ran) only when no pause is in force, so that
     * of several replicas counting the same failures one pauses and records it. True when this one did.
     */
    async autoPause(job: string, by: string, reason: string): Promise<boolean> {
      // The pause and its audit row in one transaction, as pause()'s.
      return db.transaction().execute(async (trx) => {
        const result = await sql`UPDATE ${locks} SET paused_until = NULL, paused_reason = ${reason}, paused_by = ${by}, paused_at = ${now}
          WHERE name = ${job} AND NOT (${pausedNow})`.execute(trx);
        if ((result.numAffectedRows ?? 0n) === 0n) return false;
        await audit(job, 'auto-pause', by, reason, null, trx);
        return true;
      });
    },

    /** Lifts the job's pause, and records it. True when the job was paused. */
    async resume(job: string, by: string, reason: string | null): Promise<boolean> {
      const wasPaused = (await pauseState(job)) !== undefined;
      // The resume and its audit row in one transaction, as pause()'s.
      await db.transaction().execute(async (trx) => {
        await sql`UPDATE ${locks} SET paused_until = NULL, paused_reason = NULL, paused_by = NULL, paused_at = NULL
          WHERE name = ${job} AND paused_at IS NOT NULL`.execute(trx);
        await audit(job, 'resume', by, reason, null, trx);
      });
      return wasPaused;
    },

    /**
     * Asks for one run now, on one replica that schedules the job; refused (JOB_PAUSED) while the
     * job is paused unless forced. While a request is pending, its id is returned and nothing new
     * is asked (a forced ask makes it forced): a double click, two operators or a retry ask for one
     * run, whose id they all get.
     */
    async requestTrigger(job: string, by: string, force: boolean): Promise<string> {
      if (!force && (await pauseState(job)) !== undefined) {
        throw new GuardError(
          'JOB_PAUSED',
          `Job "${job}" is paused, so it was not triggered; resume it first, or force the trigger (\`force: true\`; cronguard trigger --force)`,
          {
            job,
          },
        );
      }
      const id = randomUUID();
      // 1 and 0, not booleans: better-sqlite3 binds no boolean, and PostgreSQL reads '1' as true.
      const forced = force ? 1 : 0;
      for (let attempt = 1; ; attempt++) {
        // `trigger_id IS NULL`: a pending request is never replaced, so its id stays the one to return.
        // After a few rounds lost to takes clearing one request after another, any row takes it.
        const onlyIfNone = sql.raw(attempt <= 5 ? 'AND trigger_id IS NULL' : '');
        const { numAffectedRows } =
          await sql`UPDATE ${locks} SET trigger_id = ${id}, trigger_by = ${by}, trigger_at = ${now}, trigger_force = ${forced}
            WHERE name = ${job} ${onlyIfNone}`.execute(db);
        if ((numAffectedRows ?? 0n) > 0n) break;
        const { rows } = await sql<{ trigger_id: string | null; trigger_force: boolean | number | null }>`
          SELECT trigger_id, trigger_force FROM ${locks} WHERE name = ${job}`.execute(db);
        const row = rows[0];
        if (row === undefined) {
          try {
            // A row that was never taken: free now, no holder token, no slot run yet.
            await sql`INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, trigger_id, trigger_by, trigger_at, trigger_force)
              VALUES (${job}, ${now}, ${now}, ${by}, ${id}, ${by}, ${now}, ${forced})`.execute(db);
            break;
          } catch (error) {
            // A concurrent creator won the INSERT (a duplicate key, whatever the driver calls it): round again.
            if (!(await rowExists(job))) throw error;
            continue;
          }
        }
        if (row.trigger_id === null) continue; // taken between the two statements: ask again
        if (force && !Number(row.trigger_force)) {
          // Only that same request is made forced: one taken meanwhile has run (or been refused) already.
          // A bound 1, as above: a literal 1 is an integer to PostgreSQL's boolean column.
          const upgraded =
            await sql`UPDATE ${locks} SET trigger_force = ${1} WHERE name = ${job} AND trigger_id = ${row.trigger_id}`.execute(db);
          if ((upgraded.numAffectedRows ?? 0n) === 0n) continue;
          await audit(job, 'trigger', by, 'forced', null);
          await dialect.notifyTrigger?.(db, tables, job);
        }
        return row.trigger_id;
      }
      await audit(job, 'trigger', by, force ? 'forced' : null, null);
      await dialect.notifyTrigger?.(db, tables, job);
      return id;
    },

    /** Every pending request: the one statement a replica's poll sends, whatever its number of jobs. */
    async pendingTriggers(): Promise<PendingTrigger[]> {
      const { rows } = await sql<{
        job: string;
        trigger_id: string;
        trigger_by: string;
        trigger_force: boolean | number | null;
      }>`
        SELECT ${sql.raw(reads.name('name'))} AS job, trigger_id, trigger_by, trigger_force
          FROM ${locks} WHERE trigger_id IS NOT NULL`.execute(db);
      return rows.map((row) => ({
        job: row.job,
        id: row.trigger_id,
        by: row.trigger_by,
        force: Boolean(Number(row.trigger_force)),
      }));
    },

    /** Marks a run as a manual one, asked for by `by` (its history row, when history is on). */
    async markManual(runId: string, by: string): Promise<void> {
      await sql`UPDATE ${runs} SET triggered_by = ${by} WHERE id = ${runId}`.execute(db);
    },

    /** The statuses of the job's newest finished runs, newest first, for auto-pause. */
    async latestOutcomes(job: string, limit: number): Promise<string[]> {
      // Only the runs started after the job's last resume: a resume starts the count again (the
      // failures before it paused the job once already). A correlated NOT EXISTS on the audit,
      // one job's few rows; read after a failure only. Strictly after (`>`): a run started in the
      // resume's own millisecond (SQLite's clock, a fast machine) counts, as it began after it.
      // Runs started in one millisecond (sub-ms jobs one after the other) are ordered by their end.
      const { rows } = await sql<{ status: string }>`SELECT status FROM ${runs} r
        WHERE r.job_name = ${job} AND r.status IN ('succeeded', 'failed', 'cancelled', 'abandoned')
          AND NOT EXISTS (SELECT 1 FROM ${controls} c WHERE c.job_name = r.job_name AND c.action = 'resume' AND c.changed_at > r.started_at)
        ORDER BY r.started_at DESC, r.finished_at DESC, r.id DESC LIMIT ${limit}`.execute(db);
      return rows.map((row) => row.status);
    },

    /** The job's control changes, newest first. */
    async audit(job: string, limit: number): Promise<ControlRecord[]> {
      const { rows } = await sql<{
        id: string;
        job: string;
        action: ControlAction;
        actor: string;
        reason: string | null;
        pause_until: Date | string | null;
        changed_at: Date | string;
      }>`
        SELECT id, ${sql.raw(reads.name('job_name'))} AS job, action, actor, reason, ${time('pause_until')} AS pause_until, ${time('changed_at')} AS changed_at
          FROM ${controls} WHERE job_name = ${job} ORDER BY changed_at DESC, id DESC LIMIT ${limit}`.execute(db);
      return rows.map((row) => ({
        id: row.id,
        job: row.job,
        action: row.action,
        by: row.actor,
        reason: row.reason,
        until: row.pause_until === null ? null : toDate(row.pause_until),
        at: toDate(row.changed_at),
      }));
    },
  };
}

export type ControlStore = ReturnType<typeof createControlStore>;

/** The most pause changes one ledger read takes into account: the newest before the range's end. */
export const MAX_PAUSE_CHANGES = 1_000;

/** A pause change as the controls table gives it back. */
interface PauseChangeRow {
  action: string;
  pause_until: Date | string | null;
  changed_at: Date | string;
}

function toPauseChange(row: PauseChangeRow): PauseChangeRecord {
  return { action: row.action, until: row.pause_until === null ? null : toDate(row.pause_until), at: toDate(row.changed_at) };
}

/** The intervals that overlap [from, to). */
function overlapping(intervals: PauseInterval[], from: Date, to: Date): PauseInterval[] {
  return intervals.filter((pause) => pause.from < to && (pause.until === null || pause.until > from));
}

/**
 * The job's pause intervals that overlap [from, to), from the controls audit (the lock row keeps
 * only the pause in force; the audit keeps every one). One read on the (job_name, changed_at)
 * index, newest first and bounded, so a job paused and resumed all day costs at most
 * MAX_PAUSE_CHANGES rows; the newest change at or before `from` is among them whenever the range
 * holds fewer changes, which tells whether the range starts paused.
 */
export async function readPauseIntervals(
  db: Kysely<unknown>,
  dialect: Dialect,
  tables: TableNames,
  job: string,
  from: Date,
  to: Date,
): Promise<PauseInterval[]> {
  const controls = sql.raw(quotedTable(tables, 'controls', dialect.quote));
  const reads = dialect.reads;
  const { rows } = await sql<PauseChangeRow>`
    SELECT action, ${sql.raw(reads.time('pause_until'))} AS pause_until, ${sql.raw(reads.time('changed_at'))} AS changed_at
      FROM ${controls}
     WHERE job_name = ${job} AND action IN ('pause', 'auto-pause', 'resume') AND changed_at < ${reads.timeParameter(to)}
     ORDER BY changed_at DESC, id DESC LIMIT ${MAX_PAUSE_CHANGES}`.execute(db);
  return overlapping(pauseIntervals(rows.reverse().map(toPauseChange)), from, to);
}

/** One job's range whose pauses a read of several jobs asks for. */
export interface PauseRange {
  readonly job: string;
  readonly from: Date;
  readonly to: Date;
}

/**
 * The pause intervals of several jobs, each overlapping its [from, to), in one statement whatever
 * the number of jobs (the dashboard's overview; `readPauseIntervals` reads one job). Per job, the
 * changes in its range and the newest change before it (which tells whether the range starts
 * paused), each an index read on (job_name, changed_at); newest first, at most MAX_PAUSE_CHANGES
 * per job in all, so a flood of changes costs the oldest of them, never an unbounded read.
 */
export async function readPauseIntervalsOfJobs(
  db: Kysely<unknown>,
  dialect: Dialect,
  tables: TableNames,
  ranges: readonly PauseRange[],
): Promise<Map<string, PauseInterval[]>> {
  const intervals = new Map<string, PauseInterval[]>();
  if (ranges.length === 0) return intervals;
  const controls = sql.raw(quotedTable(tables, 'controls', dialect.quote));
  const reads = dialect.reads;
  const pauseActions = sql.raw(`action IN ('pause', 'auto-pause', 'resume')`);
  // Per job an OR term: its range on the (job_name, changed_at) index, or the id of its newest
  // change before the range (a scalar subquery with LIMIT 1, which MySQL allows where it refuses
  // `IN (SELECT … LIMIT)`). Every value bound as a parameter.
  const terms = ranges.map(({ job, from, to }) => {
    const start = reads.timeParameter(from);
    return sql`(job_name = ${job} AND changed_at >= ${start} AND changed_at < ${reads.timeParameter(to)})
      OR id = (SELECT id FROM ${controls} WHERE job_name = ${job} AND ${pauseActions} AND changed_at < ${start}
               ORDER BY changed_at DESC, id DESC LIMIT 1)`;
  });
  const { rows } = await sql<PauseChangeRow & { job: string }>`
    SELECT ${sql.raw(reads.name('job_name'))} AS job, action, ${sql.raw(reads.time('pause_until'))} AS pause_until,
           ${sql.raw(reads.time('changed_at'))} AS changed_at
      FROM ${controls}
     WHERE ${pauseActions} AND (${sql.join(terms as RawBuilder<unknown>[], sql` OR `)})
     ORDER BY changed_at DESC, id DESC LIMIT ${MAX_PAUSE_CHANGES * ranges.length}`.execute(db);
  const changesByJob = new Map<string, PauseChangeRecord[]>();
  for (const row of rows.reverse()) {
    const changes = changesByJob.get(row.job);
    if (changes === undefined) changesByJob.set(row.job, [toPauseChange(row)]);
    else changes.push(toPauseChange(row));
  }
  for (const { job, from, to } of ranges) intervals.set(job, overlapping(pauseIntervals(changesByJob.get(job) ?? []), from, to));
  return intervals;
}
