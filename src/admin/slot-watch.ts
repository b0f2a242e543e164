import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { quotedTable } from '../dialects/common/quote.js';
import { EARLY_CALL_TOLERANCE_MS, type CronSlots, processTimeZone } from '../core/cron-slots.js';
import type { GuardContext } from '../core/dialect.js';
import { messageOf } from '../core/errors.js';
import type { GuardEvents } from '../core/events.js';
import { expectedSlots, lateAfterMs, slotLedger } from '../core/slot-ledger.js';
import { spreadOffsetMs } from '../core/spread.js';
import { createDeclarationStore, type DeclarationStore } from './declarations.js';
import type { ScheduleStore } from './job-schedules.js';
import { readPauseIntervals } from './controls.js';
import { PreviousRunReader } from './history.js';
import { DECLARE_EVERY_MS, readUnslottedRuns } from './slots.js';

/** A schedule this guard runs a job on. */
export interface WatchedSchedule {
  readonly name: string;
  readonly cron: CronSlots;
  readonly lockAtMostForMs: number;
  readonly lockAtLeastForMs: number;
  /** The `catchUp` window in ms, or null. */
  readonly catchUpMs: number | null;
  /** The `spread` window in ms, or null: its runs start the job's offset inside it after their slot. */
  readonly spreadMs: number | null;
}

interface Watched {
  schedule: WatchedSchedule;
  /** The newest slot this replica took: when it is the slot before the next win, there was no gap (no read). */
  lastTaken: number;
}

/**
 * The slot ledger's live side, for the jobs this guard schedules: declares each schedule in
 * `<prefix>jobs` (when scheduled, then hourly; never per tick; the schedules of one turn of the
 * event loop, and every schedule at the hour, in one statement), and after each win of a slot tells
 * of a late start (`late` event) and of slots no replica ran since the previous run (a `missed`
 * event with the slots, `missed_slots` on the winner's run row, one warning per gap).
 */
export class SlotWatch {
  readonly #context: GuardContext;
  /** The declared schedules (the jobs table). */
  readonly #schedules: ScheduleStore;
  readonly #events: GuardEvents;
  /** Keeps the watch's own work (the reads after a win, the declarations) in flight: shutdown waits for it. */
  readonly #track: (work: Promise<unknown>) => void;
  readonly #watched = new Map<string, Watched>();
  readonly #runs: ReturnType<typeof sql.raw>;
  readonly #previousRuns: PreviousRunReader;
  #declareFailed = false;
  /** This process's declarations (migration 007): a random id, so that a restart is a new row. */
  readonly #declarations: DeclarationStore;
  readonly #instanceId = randomUUID();
  /** The jobs whose declaration row this process wrote: its shutdown marks them stopped. */
  readonly #declaredJobs = new Set<string>();
  /** The schedules declared in this turn of the event loop, sent together at its end. */
  #pending = new Map<string, WatchedSchedule>();
  /** Declares every watched schedule again, hourly, from the first declaration on. */
  #refresh: NodeJS.Timeout | undefined;

  constructor(context: GuardContext, schedules: ScheduleStore, events: GuardEvents, track: (work: Promise<unknown>) => void) {
    this.#context = context;
    this.#schedules = schedules;
    this.#events = events;
    this.#track = track;
    this.#runs = sql.raw(quotedTable(context.tables, 'runs', context.dialect.quote));
    this.#previousRuns = new PreviousRunReader(context.db, context.dialect, this.#runs);
    this.#declarations = createDeclarationStore(context.db, context.dialect, context.tables);
  }

  /**
   * At shutdown, once the runs in flight are done: this process no longer declares its jobs, since
   * `stoppedMsAgo` (when it stopped starting runs). When it was the last process declaring a job,
   * the ledger expects no slot of it from then until a process declares it again. Never rejects: a
   * stop not recorded (tables before 007, database down) leaves the later slots expected, as after
   * a crash.
   */
  async recordStop(stoppedMsAgo: number): Promise<void> {
    clearInterval(this.#refresh);
    if (this.#declaredJobs.size === 0) return;
    const { dialect, logger } = this.#context;
    try {
      await this.#declarations.stop([...this.#declaredJobs], this.#instanceId, stoppedMsAgo);
    } catch (error) {
      if (dialect.isMissingTable(error) || dialect.isReadOnly(error)) return;
      logger.warn(
        `Shutdown: recording that this replica stopped scheduling its jobs failed (their later slots count as missed): ${messageOf(error)}`,
      );
    }
  }

  /**
   * Declares a job's schedule at the end of this turn of the event loop (with the others declared
   * in it: N jobs scheduled at start are one statement) and every hour while the guard runs; a
   * changed schedule is updated.
   */
  declare(schedule: WatchedSchedule): void {
    const known = this.#watched.get(schedule.name);
    if (known !== undefined && sameSchedule(known.schedule, schedule)) return;
    this.#watched.set(schedule.name, { schedule, lastTaken: Number.NaN });
    if (this.#pending.size === 0) setImmediate(() => this.#declarePending());
    this.#pending.set(schedule.name, schedule);
    if (this.#refresh === undefined) {
      this.#refresh = setInterval(() => this.#declareAll(), DECLARE_EVERY_MS);
      this.#refresh.unref();
    }
  }

  /**
   * Declares a decorated job that has a `cron` option (one without has no schedule to declare), with
   * `@GuardedCron`'s `spread` window if any; returns the job.
   */
  declareDecorated<J extends Omit<WatchedSchedule, 'cron' | 'catchUpMs' | 'spreadMs'> & { readonly cron: CronSlots | undefined }>(
    job: J,
    spreadMs: number | null = null,
  ): J {
    if (job.cron !== undefined) this.declare({ ...job, cron: job.cron, catchUpMs: null, spreadMs });
    return job;
  }

  /** The schedule this guard declared for a job. */
  scheduleOf(job: string): WatchedSchedule | undefined {
    return this.#watched.get(job)?.schedule;
  }

  /** After a win: `late` at once; the gap before the slot off the hot path (one read, only when another replica ran the previous slot). */
  acquired(job: string, runId: string, slot: Date | null): void {
    const watched = this.#watched.get(job);
    if (watched === undefined || slot === null) return;
    const { cron } = watched.schedule;
    const at = slot.getTime();
    const lateAfter = lateAfterMs(cron.fireAfter(slot).getTime() - at, spreadOffsetMs(job, watched.schedule.spreadMs));
    const delayMs = Date.now() - at;
    if (delayMs > lateAfter) this.#events.emit('late', { job, runId, slot, delayMs, lateAfterMs: lateAfter });
    const previous = cron.slotAt(new Date(at - 1_000)).getTime();
    const ranPrevious = watched.lastTaken === previous;
    watched.lastTaken = Math.max(at, Number.isNaN(watched.lastTaken) ? at : watched.lastTaken);
    if (ranPrevious || !this.#context.history) return;
    this.#track(
      this.#findGap(watched.schedule, runId, slot).catch((error: unknown) => {
        this.#context.logger.error(`Looking for slots job "${job}" missed before ${slot.toISOString()} failed: ${messageOf(error)}`);
      }),
    );
  }

  /**
   * When a replica starts scheduling a job with `catchUp`: if the job's newest slot came after the
   * newest slot that ran (the lock row's watermark) and within the window, runs it once, as a slot
   * like any other: the watermark lets one replica take it. A job that never ran missed nothing.
   * The newest slot is the newest strictly before the first one the schedule fires itself (node-cron's
   * first fire after the instant it was scheduled, now): started just before a slot, the replica
   * fires that slot itself, so the one before it is the candidate (slotAt's early-call tolerance
   * made the coming slot the catch-up, and the missed one was never run).
   */
  catchUpAtStart(job: string, run: (slot: Date) => Promise<unknown>): void {
    const schedule = this.#watched.get(job)?.schedule;
    if (schedule?.catchUpMs === undefined || schedule.catchUpMs === null) return;
    const windowMs = schedule.catchUpMs;
    const { cron } = schedule;
    const firstFire = cron.fireAfter(new Date());
    const newest = cron.slotAt(new Date(firstFire.getTime() - 1 - EARLY_CALL_TOLERANCE_MS));
    const work = async (): Promise<void> => {
      const last = await this.#schedules.lastSlot(job);
      const now = Date.now();
      if (last === null || newest <= last || now - newest.getTime() > windowMs) return;
      // The newest slot is missed when a slot before it was missed too (the replicas were all
      // down), or when lateAfter has passed: not when the replicas still running are taking it.
      const gapBefore = cron.slotAt(new Date(newest.getTime() - 1_000)) > last;
      const lateAfter = lateAfterMs(cron.fireAfter(newest).getTime() - newest.getTime(), spreadOffsetMs(job, schedule.spreadMs));
      if (!gapBefore && now - newest.getTime() <= lateAfter) return;
      await run(newest);
    };
    this.#track(work().catch((error: unknown) => this.#context.logger.error(`Catching up job "${job}" failed: ${messageOf(error)}`)));
  }

  /**
   * Before a fire of `slot` on a job with `catchUp`, when this replica did not see the previous
   * slot settle (its schedule was stopped, or its attempt failed: `settledUpTo` older, or NaN before
   * its first fire, which the start-up catch-up covers): one read of the watermark. When the previous
   * slot (the newest missed one) came after it and within the window, that slot runs first, as a
   * slot like any other, as at start-up: every replica in the same spot tries it before `slot`, and
   * the watermark lets one take it; once `slot` (or the catch-up) is taken, the watermark is past it,
   * so there is never a second catch-up for the gap, nor an older one. Never rejects.
   */
  async catchUpAfterGap(job: string, slot: Date, settledUpTo: number, run: (slot: Date) => Promise<unknown>): Promise<void> {
    const schedule = this.#watched.get(job)?.schedule;
    if (schedule?.catchUpMs === undefined || schedule.catchUpMs === null || Number.isNaN(settledUpTo)) return;
    const previous = schedule.cron.slotAt(new Date(slot.getTime() - 1_000));
    if (settledUpTo >= previous.getTime() || Date.now() - previous.getTime() > schedule.catchUpMs) return;
    try {
      const last = await this.#schedules.lastSlot(job);
      if (last === null || last >= previous) return;
      await run(previous);
    } catch (error) {
      this.#context.logger.error(`Catching up job "${job}" after a gap failed: ${messageOf(error)}`);
    }
  }

  /** Marks a run as the catch-up of a missed slot (off the hot path). */
  markCatchUp(runId: string): void {
    if (!this.#context.history) return;
    this.#track(
      sql`UPDATE ${this.#runs} SET catch_up = ${this.#context.dialect.name === 'postgres' ? true : 1} WHERE id = ${runId}`
        .execute(this.#context.db)
        .catch((error: unknown) => this.#context.logger.error(`Marking run ${runId} as a catch-up failed: ${messageOf(error)}`)),
    );
  }

  /**
   * The newest run of the job with a slot before this one (one read for the wins of a tick,
   * previous-runs.ts): the slots between them that its lock did not cover went unrun.
   */
  async #findGap(schedule: WatchedSchedule, runId: string, slot: Date): Promise<void> {
    const { db, dialect, logger } = this.#context;
    const events = this.#events;
    const run = await this.#previousRuns.previousRun(schedule.name, slot);
    // A job's first run has nothing before it to have missed.
    if (run === null) return;
    const previous = run.slot;
    const gap = expectedSlots(schedule.cron, new Date(previous.getTime() + 1), slot);
    if (gap.slots.length === 0) return;
    const runs = [{ ...run, id: 'previous', catchUp: false }];
    const unrun = slotLedger([previous, ...gap.slots], slot, runs, schedule.lockAtLeastForMs).filter((entry) => entry.outcome === 'missed');
    if (unrun.length === 0) return;
    // Slots that fell while the job was paused were not missed, nor those a run without a slot (a
    // manual trigger still running) held off: two more reads, only when a gap was found.
    const pauses = await readPauseIntervals(db, dialect, this.#context.tables, schedule.name, previous, slot);
    const manual = await readUnslottedRuns(
      db,
      dialect,
      this.#context.tables,
      schedule.name,
      new Date(previous.getTime() - Math.max(schedule.lockAtMostForMs, schedule.lockAtLeastForMs)),
      slot,
    );
    const missed = slotLedger([previous, ...gap.slots], slot, [...runs, ...manual], schedule.lockAtLeastForMs, pauses)
      .filter((entry) => entry.outcome === 'missed')
      .map((entry) => entry.slot);
    if (missed.length === 0) return;
    // Only the winner of the slot after the gap writes this, once: SQL users see the gap there.
    await sql`UPDATE ${this.#runs} SET missed_slots = ${missed.length} WHERE id = ${runId}`.execute(db);
    const first = missed[0] as Date;
    const last = missed.at(-1) as Date;
    const more = gap.truncated ? 'at least ' : '';
    logger.warn(
      `Job "${schedule.name}" missed ${more}${missed.length} slot(s) from ${first.toISOString()} to ${last.toISOString()}: no replica ran them`,
    );
    events.emit('missed', { job: schedule.name, runId, slot, slots: missed, count: missed.length });
  }

  #declarePending(): void {
    const pending = [...this.#pending.values()];
    this.#pending = new Map();
    this.#declare(pending);
  }

  #declareAll(): void {
    this.#declare([...this.#watched.values()].map(({ schedule }) => schedule));
  }

  #declare(watched: readonly WatchedSchedule[]): void {
    const { lockedBy, logger, dialect } = this.#context;
    const schedules = this.#schedules;
    if (this.#context.isClosed()) {
      clearInterval(this.#refresh);
      return;
    }
    if (watched.length === 0) return;
    // The process's own zone, named (a valid IANA name, UTC at worst): the ledger is read on other machines too.
    const ownZone = processTimeZone(logger);
    const declared = watched.map((schedule) => ({
      name: schedule.name,
      expression: schedule.cron.expression,
      timezone: schedule.cron.timezone ?? ownZone,
      lockAtMostForMs: schedule.lockAtMostForMs,
      lockAtLeastForMs: schedule.lockAtLeastForMs,
      catchUpMs: schedule.catchUpMs,
      spreadMs: schedule.spreadMs,
    }));
    const names = declared.map(({ name }) => name);
    this.#track(
      schedules.declare(declared, lockedBy).then(
        async () => {
          this.#declareFailed = false;
          // This process's own row per job (migration 007), after the schedules: tables before 007
          // have none, and the jobs run on without it (the replica's presence says to migrate).
          await this.#declarations.declare(names, this.#instanceId, lockedBy).then(
            () => names.forEach((name) => this.#declaredJobs.add(name)),
            (error: unknown) => {
              if (!dialect.isMissingTable(error) && !dialect.isReadOnly(error)) {
                logger.warn(
                  `Declaring which replica schedules ${names.length === 1 ? 'job' : 'jobs'} "${names[0]}" for the slot ledger failed: ${messageOf(error)}`,
                );
              }
            },
          );
        },
        (error: unknown) => {
          // Once until it works again: a guard not yet migrated to 005 keeps running its jobs.
          if (this.#declareFailed) return;
          this.#declareFailed = true;
          // A read-only database: the acquires say so, once; this would only repeat it.
          if (dialect.isReadOnly(error)) return;
          const names = declared.slice(0, 3).map(({ name }) => `"${name}"`);
          const more = declared.length > 3 ? ` and ${declared.length - 3} more` : '';
          // "Migrate" only where it helps: the table is missing (tables older than 005).
          const hint = dialect.isMissingTable(error) ? ' (run `cronguard migrate`?)' : '';
          logger.warn(
            `Declaring the schedule of ${declared.length === 1 ? 'job' : 'jobs'} ${names.join(', ')}${more} for the slot ledger failed${hint}: ${messageOf(error)}`,
          );
        },
      ),
    );
  }
}

function sameSchedule(a: WatchedSchedule, b: WatchedSchedule): boolean {
  return (
    a.cron.expression === b.cron.expression &&
    a.cron.timezone === b.cron.timezone &&
    a.lockAtMostForMs === b.lockAtMostForMs &&
    a.lockAtLeastForMs === b.lockAtLeastForMs &&
    a.catchUpMs === b.catchUpMs &&
    a.spreadMs === b.spreadMs
  );
}
