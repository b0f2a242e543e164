import { IANAZone } from 'luxon';
import { schedule as scheduleTask, type ScheduledTask, type TaskContext } from 'node-cron';
import type { SlotWatch } from '../../admin/slot-watch.js';
import { assertCronExpression } from '../../core/cron-fields.js';
import { MAX_CRON_EXPRESSION_LENGTH, resolveCronSlots } from '../../core/cron-slots.js';
import { parseDuration, type DurationInput } from '../../core/duration.js';
import { noteFireStep } from '../../core/fire-timeline.js';
import { resolveSpread, spreadOffsetMs } from '../../core/spread.js';
import type { ResolvedJobRunner } from '../../core/runner.js';
import { messageOf, type GuardError, describeValue } from '../../core/errors.js';
import type { ExecutionContext } from '../../core/execution-context.js';
import { isCancellation, type JobFunction } from '../../core/execute.js';
import type { JobOptions, ResolvedJob } from '../../core/job-options.js';
import type { Logger } from '../../core/logger.js';
import type { RunResult } from '../../core/run-result.js';
import { watchWhileScheduling } from './coordinator.js';
import { spreadFires, type SlotFireEntry, type SlotFires } from './slot-fires.js';
import { scheduleOnZonedFires } from './slot-heartbeat.js';

/** A job to run on a cron schedule. */
export interface ScheduleOptions extends JobOptions {
  /** The IANA time zone the cron expression is read in. @default the process's time zone */
  timezone?: string;
  /**
   * Runs a missed slot once: when this replica starts scheduling the job, or fires after a gap it
   * did not see settle (its schedule stopped and started again, its attempts failed), and the
   * newest slot came after the newest slot that ran, within this window, that one slot runs (on one
   * replica, with `ctx.slot` the missed slot and `ctx.catchUp` true, recorded `catch_up` in the
   * history). Never an older slot, never more than one per gap.
   * @default false
   */
  catchUp?: false | DurationInput;
  /**
   * Starts each run a stable offset after its slot, inside this window, so that the jobs due at
   * the same instant (every `* * * * *` job at second 0) do not all reach the database together.
   * The offset comes from a hash of the job's name (SHA-1, modulo the window, in ms): the same on
   * every replica and after every restart. The slot stays the nominal time: every replica races for
   * it, it runs once, `ctx.slot` and the history's slot are the nominal time (the history's start
   * shows the offset), and the slot ledger counts a run late only past its offset plus lateAfter.
   * Must be shorter than the time between two slots (a `TypeError` otherwise). Not applied to
   * `guard.trigger` runs, to a run by hand (`task.execute()`), nor to a `catchUp` run at start.
   * @default 0: no spread, each run starts at its slot
   */
  spread?: DurationInput;
}

/** What `guard.schedule` needs from its guard. */
export interface ScheduleHost {
  /** Resolves the job's options, and runs each fire (the guard's `Runner`). */
  readonly runner: ResolvedJobRunner;
  /** Tasks to stop on shutdown; a destroyed task leaves the set. */
  readonly tasks: Set<ScheduledTask>;
  /** The guard's tasks due at one slot fire together, at the first of them (slot-fires.ts). */
  readonly fires: SlotFires;
  /** A task was added, started again or destroyed: its next fires changed. */
  tasksChanged(): void;
  /** Where a scheduled job's error goes, since no caller awaits it. */
  readonly logger: Logger;
  /** The slot ledger's live side: the schedule is declared there, and catch-up starts there. */
  readonly slotWatch: SlotWatch;
  /** Answers the job's "run now" requests (guard.trigger) on this replica with `fn`; returns the function that stops. */
  watchTriggers(job: ResolvedJob, fn: JobFunction<unknown>): () => void;
  /** Whether the guard is shutting down: a fire still waiting for its `spread` offset then does not run. */
  isClosed(): boolean;
}

/**
 * Schedules `fn` with node-cron under the job's lock, each fire keyed on its nominal slot (at most
 * one run per slot across replicas). The expression, the time zone and the job options are checked
 * now: a `TypeError` when wrong.
 */
export function scheduleJob<T>(host: ScheduleHost, expression: string, options: ScheduleOptions, fn: JobFunction<T>): ScheduledTask {
  const job = host.runner.resolveJob(options);
  assertCronExpression(expression, 'the schedule', job.name);
  if (expression.length > MAX_CRON_EXPRESSION_LENGTH) {
    throw new TypeError(
      `Expected the cron expression of job ${JSON.stringify(job.name)} to be at most ${MAX_CRON_EXPRESSION_LENGTH} characters long ` +
        `(the slot ledger's column), got ${expression.length}: ${describeValue(expression)}`,
    );
  }
  if (job.cron !== undefined && job.cron.expression !== expression) {
    throw new TypeError(
      `Expected \`cron\` of job ${JSON.stringify(job.name)} to be left out of guard.schedule, which fires on its own expression ` +
        `${JSON.stringify(expression)}, got ${describeValue(job.cron.expression)}`,
    );
  }
  const timezone = options.timezone;
  if (timezone !== undefined && (typeof timezone !== 'string' || !IANAZone.isValidZone(timezone))) {
    throw new TypeError(
      `Expected \`timezone\` of job ${JSON.stringify(job.name)} to be an IANA time zone like 'Europe/Paris', got ${describeValue(timezone)}`,
    );
  }
  const catchUpMs = resolveCatchUp(options.catchUp, job.name);
  const cron = resolveCronSlots(expression, timezone, job.name);
  const spreadMs = resolveSpread(options.spread, job.name, cron);
  if (cron !== undefined) host.slotWatch.declare({ ...job, cron, catchUpMs, spreadMs });
  const catchUpRun = (slot: Date) =>
    runScheduled(
      host,
      job,
      asCatchUp(fn, (runId) => host.slotWatch.markCatchUp(runId)),
      slot,
    );
  // The newest slot this replica saw settled (it ran, or found it run, held or paused): a fire
  // whose previous slot is newer than this may follow a gap (catchUp's check; no read otherwise).
  let settledUpTo = Number.NaN;
  const fire = async (slot: Date | null): Promise<void> => {
    if (slot !== null && catchUpMs !== null) await host.slotWatch.catchUpAfterGap(job.name, slot, settledUpTo, catchUpRun);
    const result = await runScheduled(host, job, fn, slot);
    if (slot !== null && !(result !== undefined && !result.executed && result.reason === 'error')) {
      settledUpTo = Math.max(slot.getTime(), Number.isNaN(settledUpTo) ? slot.getTime() : settledUpTo);
    }
  };
  // node-cron's context.date is the slot a scheduled fire is for, not the moment the timer fired.
  // A run invoked by hand (task.execute()) has no slot: its date is just "now" on this replica.
  // A scheduled fire goes through the guard's SlotFires, which fires every task due at that slot
  // at the first of them (`entry` is set before node-cron's first fire, which comes from a timer).
  // The task fires on the expression's real instants, DST nights included (slot-heartbeat.ts).
  // A job with `spread` fires alone, after its offset (`spreadFires`, slot-fires.ts), not with the slot's others.
  const onFire = (context: TaskContext): Promise<void> => {
    if (context.execution?.reason === 'invoked') return fire(null);
    noteFireStep('fire', job.name, context.date);
    if (spreadFire !== undefined) return spreadFire(context.date);
    return entry === undefined ? fire(context.date) : host.fires.fire(entry, context.date);
  };
  const taskOptions = { name: job.name, ...(timezone === undefined ? {} : { timezone }) };
  const task = cron === undefined ? scheduleTask(expression, onFire, taskOptions) : scheduleOnZonedFires(cron, onFire, taskOptions);
  const spreadFire =
    cron === undefined || spreadMs === null
      ? undefined
      : spreadFires(task, cron, spreadOffsetMs(job.name, spreadMs), fire, () => host.isClosed());
  const entry: SlotFireEntry | undefined =
    cron === undefined || spreadFire !== undefined ? undefined : host.fires.add({ name: job.name, task, cron, fire });
  host.tasks.add(task);
  // node-cron destroys a task on destroy() or after maxExecutions; a stopped one can start again.
  task.on('task:destroyed', () => {
    host.tasks.delete(task);
    if (entry !== undefined) host.fires.delete(entry);
    host.tasksChanged();
  });
  task.on('task:started', () => {
    if (entry !== undefined) entry.startedAt = Date.now();
    host.tasksChanged();
  });
  // This replica answers the job's "run now" requests while the task is scheduled, as a
  // coordinator's tasks do: a stopped task no longer runs its slots, nor a trigger.
  watchWhileScheduling(task, () => host.watchTriggers(job, fn as JobFunction<unknown>));
  host.tasksChanged();
  host.slotWatch.catchUpAtStart(job.name, catchUpRun);
  return task;
}

/**
 * One fire: the run, whose job error goes to the guard's logger (the `failed` or `cancelled` event
 * has the error itself). Never rejects: node-cron would print a rejection's stack on the console.
 */
async function runScheduled<T>(
  host: ScheduleHost,
  job: ResolvedJob,
  fn: JobFunction<T>,
  slot: Date | null,
): Promise<RunResult<Awaited<T>> | undefined> {
  let context: ExecutionContext | undefined;
  try {
    return await host.runner.runResolved(
      job,
      (ctx) => {
        context = ctx;
        return fn(ctx);
      },
      { slot },
    );
  } catch (error) {
    // The signal's reason, when it aborted before the job ended (else EXECUTION_ENDED, which no job threw).
    const reason = context?.signal.reason as GuardError | undefined;
    if (isCancellation(error, reason)) host.logger.warn(`Job "${job.name}" stopped: ${messageOf(reason)}`);
    else host.logger.error(`Job "${job.name}" failed: ${messageOf(error)}`);
    return undefined;
  }
}

/** The `catchUp` option of `guard.schedule`: the window in ms, or null without catch-up; a `TypeError` when wrong. */
function resolveCatchUp(value: unknown, job: string): number | null {
  if (value === undefined || value === false) return null;
  const ms =
    typeof value === 'string' || typeof value === 'number' ? parseDuration(value as DurationInput, { option: 'catchUp', job }) : Number.NaN;
  if (ms > 0) return ms;
  throw new TypeError(
    `Expected \`catchUp\` of job ${JSON.stringify(job)} to be false or a duration like '1h', got ${describeValue(value)}`,
  );
}

/** The job as a catch-up run sees it: `ctx.catchUp` true, the run marked in the history (`markCatchUp`). */
function asCatchUp<T>(fn: JobFunction<T>, markCatchUp: (runId: string) => void): JobFunction<T> {
  return (ctx) => {
    markCatchUp(ctx.runId);
    const context: ExecutionContext = {
      name: ctx.name,
      runId: ctx.runId,
      slot: ctx.slot,
      catchUp: true,
      get signal() {
        return ctx.signal;
      },
      get lockExpiresAt() {
        return ctx.lockExpiresAt;
      },
      extend: (duration) => ctx.extend(duration),
    };
    return fn(context);
  };
}
