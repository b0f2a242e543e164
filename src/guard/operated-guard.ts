import type { Administration } from '../admin/administration.js';
import type { ControlRecord, PauseState } from '../admin/controls.js';
import type { JobDiagnosis } from '../admin/doctor.js';
import { pointInTime, type HistoryPage, type HistoryQuery } from '../admin/history.js';
import type { LockRecord } from '../admin/locks.js';
import type { DurationInput } from '../core/duration.js';
import type { JobFunction } from '../core/execute.js';
import type { ResolvedJob } from '../core/job-options.js';
import { GuardError } from '../core/errors.js';
import {
  TRIGGER_WATCH,
  type GuardControls,
  type PauseOptions,
  type ResumeOptions,
  type TriggerOptions,
  type UnlockOptions,
} from './guard-controls.js';
import {
  createDashboard,
  type DashboardHandler,
  type DashboardOptions,
  type DashboardSource,
} from '../integrations/dashboard/dashboard.js';
import { gatedSource, ReadGate } from '../integrations/dashboard/read-gate.js';

/**
 * What a `Guard` offers operators beside its runs: the history, locks, unlock, doctor and prune
 * (delegated to `admin/administration.ts`), and the operator controls (pause, resume, trigger,
 * their audit), shared by every replica through the lock rows, without a deploy. `Guard` extends
 * it; see docs/operating.md.
 */
export class OperatedGuard {
  readonly #admin: Administration;
  readonly #controls: GuardControls;

  constructor(admin: Administration, controls: GuardControls) {
    this.#admin = admin;
    this.#controls = controls;
  }

  /**
   * Runs from the history, newest first, with a cursor for the next page.
   * @example
   * const { runs, next } = await guard.history({ job: 'nightly-report', status: 'failed', since: '24h' });
   */
  history(query?: HistoryQuery): Promise<HistoryPage> {
    return this.#admin.history(query);
  }

  /**
   * Every lock row with its holder, `held` or `free`, and the time left, on the database's clock;
   * with its pause (`paused`: until, reason, by) and a pending "run now" request (`pendingTrigger`).
   */
  locks(): Promise<LockRecord[]> {
    return this.#admin.locks();
  }

  /**
   * Frees a job's lock by hand, for a lock left by a process that is gone. If that process is in
   * fact alive, its job and the next one can overlap. True when the lock was held.
   */
  async unlock(name: string, options: UnlockOptions = {}): Promise<boolean> {
    const { job, audit } = this.#controls.auditOf(name, options);
    // The audit (`guard.controls`) records who freed it, whose lock it was and which run.
    return (await this.#admin.unlock(job, audit)) !== undefined;
  }

  /**
   * Forgets a job no replica runs any more (a mistyped name's row, a retired job): deletes its lock
   * row and its declared schedule, so that it leaves `locks`, `doctor`, `slots` and the dashboard;
   * its history stays. Refused with `JOB_LOCKED` while its lock is held; false when the tables did
   * not know it. A replica that still runs it brings it back at its next run or declaration.
   */
  async forget(name: string, options: UnlockOptions = {}): Promise<boolean> {
    const { job, audit } = this.#controls.auditOf(name, options);
    const outcome = await this.#admin.forget(job, audit);
    if (outcome === 'held') {
      throw new GuardError('JOB_LOCKED', `Job "${job}" holds its lock now: wait for its run to end (or unlock it) before forgetting it`, {
        job,
      });
    }
    return outcome === 'forgotten';
  }

  /** Every job the tables know (a lock row or a declared schedule), by name: for a "did you mean" and for listings. */
  jobNames(): Promise<string[]> {
    return this.#admin.allJobNames();
  }

  /**
   * Per job (every lock row), what its newest runs say: counts, durations, the lockAtMostFor in
   * force, problems, and a suggested lockAtMostFor. What `cronguard doctor` prints.
   */
  async doctor(): Promise<JobDiagnosis[]> {
    return this.#admin.doctor();
  }

  /**
   * Deletes history rows that started before `olderThan` (a Date, or a duration meaning that long
   * ago), keeping each job's newest run and every `running` row. Returns how many went.
   */
  async prune(olderThan: Date | DurationInput): Promise<number> {
    const cutoff = pointInTime(olderThan, 'olderThan');
    return this.#admin.prune(cutoff);
  }

  /**
   * Pauses a job on every replica: from its next attempt on, no replica starts it (each attempt is
   * skipped with reason `paused`: one read that writes nothing). A run already going is not
   * touched. Records who (`by`, else the guard's `lockedBy`), when and why in the audit; with
   * `until`, the pause lifts by itself. A job that never ran can be paused: its lock row is
   * created, so that it stays off from its first deploy. Resolves with the pause as recorded.
   * @example
   * await guard.pause('nightly-report', { until: '2h', reason: 'warehouse migration' });
   */
  pause(name: string, options?: PauseOptions): Promise<PauseState> {
    return this.#controls.pause(name, options);
  }

  /** Lifts a job's pause on every replica, and records it. True when the job was paused. */
  resume(name: string, options?: ResumeOptions): Promise<boolean> {
    return this.#controls.resume(name, options);
  }

  /**
   * Asks for one run of the job now, on exactly one replica that schedules it (with
   * `guard.schedule`, a node-cron task of `guard.coordinator()`, or `@GuardedCron`), within
   * `controlPollInterval` (PostgreSQL: at once, through LISTEN/NOTIFY). The run has no slot: it
   * neither moves the slot watermark nor uses up the next scheduled slot, and its history row says
   * who asked (`triggeredBy`). Refused with a `GuardError` `JOB_PAUSED` while the job is paused,
   * unless `force`. While a request of the job is pending (asked, not yet taken by a replica),
   * nothing new is asked: it resolves with that request's id (a `force` makes it forced), so a
   * double click or a retry runs the job once. Resolves with the request's id.
   */
  trigger(name: string, options?: TriggerOptions): Promise<string> {
    return this.#controls.trigger(name, options);
  }

  /** The job's control changes (pause, resume, trigger, auto-pause), newest first: who, what, when, why. */
  controls(name: string, options?: { limit?: number }): Promise<ControlRecord[]> {
    return this.#controls.controls(name, options);
  }

  /**
   * Makes this replica answer the job's "run now" requests by running `fn` (through the same
   * trigger take as `guard.schedule`'s jobs); returns the function that stops. For this package's
   * entries above the guard (the NestJS module). @internal
   */
  [TRIGGER_WATCH](job: ResolvedJob, fn: JobFunction<unknown>, spreadMs: number | null = null): () => void {
    // A job this replica answers triggers for is declared now, with its `cron` and `spread` (a
    // `@GuardedCron` method): `cronguard trigger` refuses names the tables have never seen, and a
    // job that has not fired yet would otherwise be one of them.
    this.#admin.slotWatch.declareDecorated(job, spreadMs);
    return this.#controls.watchTriggers(job, fn);
  }
}

/**
 * One line of dashboard reads per guard (per administration), shared by every `guard.dashboard()`
 * handler: however many handlers and pages, DASHBOARD_CONCURRENT_READS reads at once on its pool.
 */
const gates = new WeakMap<Administration, ReadGate>();

function gateOf(admin: Administration): ReadGate {
  let gate = gates.get(admin);
  if (gate === undefined) {
    gate = new ReadGate();
    gates.set(admin, gate);
  }
  return gate;
}

/** What a guard's dashboard reads and does: its administration, and its operator controls. */
export function dashboardSource(admin: Administration, operator: GuardControls): DashboardSource {
  return {
    jobNames: (query) => admin.jobNames(query),
    recentRuns: (jobs, perJob) => admin.recentRuns(jobs, perJob),
    recentSlots: (jobs, perJob) => admin.recentSlots(jobs, perJob),
    slots: (query) => admin.slots(query),
    run: (id) => admin.run(id),
    history: (query) => admin.history(query),
    locks: (names) => admin.locks(names),
    unlock: async (job, by) => (await admin.unlock(job, { by, reason: null })) !== undefined,
    controls: {
      pause: (job, pause) => operator.pause(job, pause),
      resume: (job, resume) => operator.resume(job, resume),
      trigger: (job, trigger) => operator.trigger(job, trigger),
      audit: (job) => operator.controls(job),
    },
  };
}

/** A guard's web dashboard (`guard.dashboard()`): its errors go to the guard's logger. */
export function guardDashboard(admin: Administration, operator: GuardControls, options: DashboardOptions | undefined): DashboardHandler {
  return createDashboard(gatedSource(dashboardSource(admin, operator), gateOf(admin)), options, operator.logger);
}
