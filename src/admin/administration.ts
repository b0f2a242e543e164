import type { GuardContext } from '../core/dialect.js';
import { GuardError, messageOf } from '../core/errors.js';
import type { GuardEvents } from '../core/events.js';
import {
  createJobListReader,
  DASHBOARD_PAGE_JOBS,
  type JobNamesQuery,
  createDashboardReader,
  type RecentRuns,
  type RunDetail,
  createDashboardLedgerReader,
  type RecentSlots,
} from './dashboard-reads.js';
import { packageVersionOrUnknown, hasOperatorControls, hasSlotLedger, readSchemaVersions } from './versions.js';
import { diagnoseJob, PROBLEM_WINDOW_MS, RUNS_PER_JOB, type JobDiagnosis, diagnoseLedger } from './doctor.js';
import { createHistoryReader, type HistoryPage, type HistoryQuery, createPruner } from './history.js';
import { createScheduleStore, type ScheduleStore } from './job-schedules.js';
import { createLockReader, type LockRecord, type UnlockAudit, type UnlockedLock } from './locks.js';
import { runMigrations, type MigrationReport } from './migrate.js';
import { createReplicaTable, holderVersion, type ReplicaRecord, type ReplicaTable, type VersionReport } from './replicas.js';
import { SlotWatch } from './slot-watch.js';
import { createSlotsReader, type JobLedger, type SlotsQuery } from './slots.js';

export type { VersionReport } from './replicas.js';
export type { SchemaVersions } from './versions.js';
export type { MigrationReport } from './migrate.js';

export type { JobLedger, SlotsQuery } from './slots.js';

/** How often a guard with `historyRetention` prunes, and how much at a time. */
const RETENTION_INTERVAL_MS = 3_600_000;
const RETENTION_MAX_BATCHES = 10;

/**
 * A guard's history, locks, unlock, doctor, prune and migrate: the reads and maintenance writes
 * beside the runs. The `Guard` validates the arguments and delegates here.
 */
export class Administration {
  readonly #context: GuardContext;
  /** `historyRetention` in ms; undefined: no background pruning. */
  readonly #retentionMs: number | undefined;
  readonly #readHistory: ReturnType<typeof createHistoryReader>;
  readonly #lockReader: ReturnType<typeof createLockReader>;
  readonly #prune: ReturnType<typeof createPruner>;
  readonly #dashboardReader: ReturnType<typeof createDashboardReader>;
  readonly #recentSlots: ReturnType<typeof createDashboardLedgerReader>;
  readonly #jobNames: ReturnType<typeof createJobListReader>;
  readonly #replicas: ReplicaTable;
  /** The jobs table: declared schedules (the slot ledger). */
  readonly schedules: ScheduleStore;
  readonly #readSlots: ReturnType<typeof createSlotsReader>;
  /** Declared schedules, and the late and missed checks after each win of a slot. */
  readonly slotWatch: SlotWatch;
  /** performance.now() of the last retention prune; the first comes after the first run. */
  #prunedAt = Number.NEGATIVE_INFINITY;
  /** The tables were seen with the operator controls (migration 004); see #hasControls. */
  #controlsPresent = false;

  /**
   * `events` and `track`: the guard's runs, which the slot watch follows after each win (see
   * SlotWatch) and whose follow-up work shutdown waits for.
   */
  constructor(context: GuardContext, retentionMs: number | undefined, events: GuardEvents, track: (work: Promise<unknown>) => void) {
    this.#context = context;
    this.#retentionMs = retentionMs;
    const { db, dialect, tables } = context;
    this.#readHistory = createHistoryReader(db, dialect, tables);
    this.#lockReader = createLockReader(db, dialect, tables);
    this.#prune = createPruner(db, dialect, tables);
    this.#dashboardReader = createDashboardReader(db, dialect, tables);
    this.#jobNames = createJobListReader(db, dialect, tables);
    this.#replicas = createReplicaTable(db, dialect, tables);
    this.schedules = createScheduleStore(db, dialect, tables);
    this.#readSlots = createSlotsReader(db, dialect, tables, this.schedules, () => this.#lockReader.now());
    this.#recentSlots = createDashboardLedgerReader(db, dialect, tables, this.schedules, () => this.#lockReader.now());
    this.slotWatch = new SlotWatch(context, this.schedules, events, track);
  }

  slots(query: SlotsQuery | undefined): Promise<JobLedger[]> {
    return this.#reading(() => this.#readSlots(query), 'slots');
  }

  history(query: HistoryQuery | undefined): Promise<HistoryPage> {
    return this.#reading(async () => this.#readHistory(query, { controls: await this.#hasControls() }), 'history');
  }

  /** Each lock row (or those of the jobs named) with the cronguard version its holder recorded (migration 003). */
  locks(names?: readonly string[]): Promise<LockRecord[]> {
    return this.#reading(async () => {
      const replicas = await this.#replicas.list();
      return (await this.#lockReader.list(await this.#hasControls(), names)).map((lock) => ({
        ...lock,
        version: holderVersion(lock.lockedBy, replicas),
      }));
    }, 'locks');
  }

  /** The schema version of the tables and of this code, and the replicas' cronguard versions. */
  versions(): Promise<VersionReport> {
    return this.#reading(async () => {
      const schema = await readSchemaVersions(this.#context.db, this.#context.dialect, this.#context.tables);
      const replicas: ReplicaRecord[] = await this.#replicas.list();
      const holders = (await this.#lockReader.list(hasOperatorControls(schema))).filter((lock) => lock.state === 'held');
      return {
        package: packageVersionOrUnknown(),
        schema,
        replicas,
        holders: holders.map((lock) => ({
          job: lock.name,
          lockedBy: lock.lockedBy,
          version: holderVersion(lock.lockedBy, replicas),
        })),
      };
    }, 'versions');
  }

  /** A page of job names: lock rows and declared schedules (the dashboard's overview). */
  jobNames(query: JobNamesQuery): Promise<string[]> {
    return this.#reading(() => this.#jobNames(query), 'dashboard');
  }

  /** The newest runs of a page of jobs, in one query (the dashboard's overview). */
  recentRuns(jobs: readonly string[], perJob: number): Promise<RecentRuns> {
    return this.#reading(() => this.#dashboardReader.recentRuns(jobs, perJob), 'dashboard');
  }

  /** The newest slots of a page of jobs and their pauses, in four queries (the dashboard's overview). */
  recentSlots(jobs: readonly string[], perJob: number): Promise<RecentSlots> {
    return this.#reading(() => this.#recentSlots(jobs, perJob), 'dashboard');
  }

  /** One run by its id (the dashboard's run page). */
  run(id: string): Promise<RunDetail | undefined> {
    return this.#reading(() => this.#dashboardReader.run(id), 'dashboard');
  }

  /** Frees a held lock (`job` is a validated name) and records who freed whose; undefined when it was not held. */
  unlock(job: string, audit: UnlockAudit): Promise<UnlockedLock | undefined> {
    return this.#reading(async () => this.#lockReader.unlock(job, (await this.#hasControls()) ? audit : undefined), 'unlock');
  }

  /** Deletes a job's lock row and declared schedule (its history stays); refused while its lock is held. */
  forget(job: string, audit: UnlockAudit): Promise<'forgotten' | 'held' | 'unknown'> {
    return this.#reading(async () => {
      const versions = await readSchemaVersions(this.#context.db, this.#context.dialect, this.#context.tables);
      return this.#lockReader.forget(job, hasOperatorControls(versions) ? audit : undefined, hasSlotLedger(versions));
    }, 'forget');
  }

  /** Every job the tables know (a lock row or a declared schedule), by name, read a page at a time: for a "did you mean". */
  allJobNames(): Promise<string[]> {
    return this.#reading(async () => {
      const names: string[] = [];
      for (;;) {
        const page = await this.#jobNames({ after: names.at(-1), limit: DASHBOARD_PAGE_JOBS + 1 });
        names.push(...page);
        if (page.length < DASHBOARD_PAGE_JOBS + 1) return names;
      }
    }, 'jobNames');
  }

  /** Per lock row (and per declared schedule), the diagnosis of its newest runs and of its slot ledger. */
  doctor(): Promise<JobDiagnosis[]> {
    return this.#reading(async () => {
      const now = await this.#lockReader.now();
      const replicas = await this.#replicas.list();
      const diagnoses: JobDiagnosis[] = [];
      const schedules = new Map((await this.schedules.list()).map((schedule) => [schedule.name, schedule]));
      const ledgers = new Map(
        (await this.#readSlots({ since: new Date(now.getTime() - PROBLEM_WINDOW_MS) })).map((ledger) => [ledger.job, ledger]),
      );
      // Every lock row, then the declared schedules that never ran (no lock row yet: who declared it).
      const controls = await this.#hasControls();
      const locks = await this.#lockReader.list(controls);
      const holders = [
        ...locks.map((lock) => ({ name: lock.name, lockedBy: lock.lockedBy })),
        ...[...schedules.values()]
          .filter((schedule) => !locks.some((lock) => lock.name === schedule.name))
          .map((schedule) => ({ name: schedule.name, lockedBy: schedule.declaredBy })),
      ];
      for (const { name, lockedBy } of holders) {
        const { runs } = await this.#readHistory({ job: name, limit: RUNS_PER_JOB }, { withSkips: false, controls });
        const diagnosis = { ...diagnoseJob(name, runs, now), lockedBy, version: holderVersion(lockedBy, replicas) };
        const schedule = schedules.get(name);
        if (schedule === undefined) {
          diagnoses.push(diagnosis);
          continue;
        }
        // A job with a declared schedule: what its slot ledger of the last day says, too.
        const { problems, notes, ...counts } = diagnoseLedger(schedule, ledgers.get(name), runs, now);
        diagnoses.push({ ...diagnosis, ...counts, problems: [...diagnosis.problems, ...problems], notes: [...diagnosis.notes, ...notes] });
      }
      return diagnoses;
    }, 'doctor');
  }

  prune(cutoff: Date): Promise<number> {
    return this.#reading(() => this.#prune(cutoff), 'prune');
  }

  async migrate(): Promise<MigrationReport> {
    this.#assertOpen('migrate');
    const versions = await runMigrations(this.#context.db, this.#context.dialect, this.#context.tables);
    // The tables this call migrated have the controls: history() and locks() need not read the version.
    if (hasOperatorControls(versions)) this.#controlsPresent = true;
    return versions;
  }

  /** With historyRetention, prunes in the background at most once an hour; never delays the job. */
  pruneByRetention(): void {
    const retentionMs = this.#retentionMs;
    if (retentionMs === undefined || performance.now() - this.#prunedAt < RETENTION_INTERVAL_MS) return;
    this.#prunedAt = performance.now();
    this.#prune(new Date(Date.now() - retentionMs), RETENTION_MAX_BATCHES).catch((error: unknown) => {
      this.#context.logger.error(`Pruning the run history failed: ${messageOf(error)}`);
    });
  }

  /**
   * After shutdown the pool is ended (or ending): a GuardError that says so, rather than whatever
   * the driver says about a destroyed pool.
   */
  #assertOpen(method: string): void {
    if (this.#context.isClosed()) throw new GuardError('GUARD_CLOSED', `The guard is shut down; ${method}() is no longer available`);
  }

  /**
   * Whether the tables have migration 004's columns (the pause, the trigger, triggered_by). A read
   * of the schema version until the answer is yes (or this guard's migrate() said so); from then on
   * remembered, since migrations only go forward: history() and locks() then cost their one read,
   * as before the controls existed.
   */
  async #hasControls(): Promise<boolean> {
    if (this.#controlsPresent) return true;
    const { db, dialect, tables } = this.#context;
    this.#controlsPresent = hasOperatorControls(await readSchemaVersions(db, dialect, tables));
    return this.#controlsPresent;
  }

  /** Turns "no such table" into a GuardError that says to migrate; refuses once the guard is shut down. */
  async #reading<T>(read: () => Promise<T>, method: string): Promise<T> {
    this.#assertOpen(method);
    try {
      return await read();
    } catch (cause) {
      if (!this.#context.dialect.isMissingTable(cause)) throw cause;
      throw new GuardError('TABLE_MISSING', 'The cronguard tables do not exist; run `cronguard migrate` or `await guard.migrate()`', {
        cause,
      });
    }
  }
}
