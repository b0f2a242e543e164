import type { OpenedDatabase } from '../dialects/connect.js';
import type { Administration } from '../admin/administration.js';
import type { ReplicaPresence } from '../admin/replicas.js';
import type { SlotWatch } from '../admin/slot-watch.js';
import { hasOperatorControls, readSchemaVersions, type SchemaVersions } from '../admin/versions.js';
import { messageOf } from '../core/errors.js';
import type { GuardEvents } from '../core/events.js';
import type { Logger } from '../core/logger.js';
import type { RunContext, RunSteps } from '../core/run-state.js';
import type { RunEnding } from '../core/run-result.js';
import { Runner } from '../core/runner.js';
import type { GuardControls } from './guard-controls.js';
import type { ResolvedGuardOptions } from './guard-options.js';
import type { AcquireOutcome, AcquireRequest, BatchedAcquire, LockStore } from '../core/dialect.js';
import type { ResolvedJob } from '../core/job-options.js';

/**
 * A guard's runner: its lock store on the opened database, its events, and the steps it takes
 * around each run (`steps`). The runner owns the run state. `schemaGate`: what the guard tells its
 * lock store about the tables' schema (`schemaGatedLockStore`, below).
 */
export function createGuardRunner(
  resolved: ResolvedGuardOptions,
  opened: OpenedDatabase,
  events: GuardEvents,
  steps: RunSteps,
): { runner: Runner; schemaGate: SchemaGate } {
  const { dialect, tables } = resolved;
  const settings = {
    native: resolved.preparedStatements ? opened.native : undefined,
    history: resolved.history,
    acquireTimeoutMs: resolved.acquireTimeoutMs,
  };
  // The pause is read only once the tables have its columns (migration 004): on tables nobody
  // migrated yet, the jobs still run, with the statements of before.
  const { store, gate } = schemaGatedLockStore(
    dialect.createLockStore(opened.db, tables, settings),
    dialect.createLockStore(opened.db, tables, { ...settings, operatorControls: false }),
    async () => hasOperatorControls(await readSchemaVersions(opened.db, dialect, tables)),
  );
  const runner = new Runner({
    store,
    dialect,
    lockedBy: resolved.lockedBy,
    logger: resolved.logger,
    events,
    defaults: resolved.defaults,
    recordSkips: resolved.recordSkips,
    statementTimeoutMs: resolved.acquireTimeoutMs,
    steps,
  });
  return { runner, schemaGate: gate };
}

/**
 * What a guard does around each of its runs beyond the lock (`RunSteps`, core/run-state.ts), in the
 * order the run path takes them. None holds the run up: what needs the database goes on in the
 * background, tracked for shutdown. OpenTelemetry's spans and metrics are not steps: they report
 * the guard's public events, as a listener of the app's own would (integrations/telemetry); only
 * the span's context around the job's body is (`inRunContext`).
 */
export class GuardRunSteps implements RunSteps {
  readonly #slotWatch: SlotWatch;
  readonly #presence: ReplicaPresence;
  readonly #controls: GuardControls;
  readonly #administration: Administration;
  readonly #logger: Logger;
  readonly inRunContext: RunContext;

  constructor(
    administration: Administration,
    presence: ReplicaPresence,
    controls: GuardControls,
    inRunContext: RunContext,
    logger: Logger,
  ) {
    this.#administration = administration;
    this.#slotWatch = administration.slotWatch;
    this.#presence = presence;
    this.#controls = controls;
    this.inRunContext = inRunContext;
    this.#logger = logger;
  }

  won(job: ResolvedJob, runId: string, slot: Date | null): void {
    // 1. The slot ledger: a `late` event at once; the slots missed before this one, read in the
    //    background (only when another replica ran the previous slot).
    this.#step('slot ledger', job, () => this.#slotWatch.acquired(job.name, runId, slot));
    // 2. This replica's cronguard version beside its lockedBy: written at the first win, then about
    //    once an hour, in the background (a losing acquire still writes nothing).
    this.#step('replica presence', job, () => this.#presence.noteActivity());
  }

  finished(job: ResolvedJob, ending: RunEnding, released: boolean): void {
    // 1. autoPause: a failed run is counted once its release answered (its history row says `failed`).
    this.#step('autoPause count', job, () => this.#controls.countFailure(job, ending, released));
    // 2. The retention prune, at most hourly, when the guard has `retention`.
    this.#step('retention prune', job, () => this.#administration.pruneByRetention());
  }

  /**
   * A step never throws into the run path: `won` runs between the win and the job, where a throw
   * would leave the lock taken and the job never run. Each step is kept from the others, too.
   */
  #step(name: string, job: ResolvedJob, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.#logger.error(`The ${name} step of job "${job.name}" threw: ${messageOf(error)}`);
    }
  }
}

/** A job's body run as it is: the run context of a guard without telemetry. */
export const NO_RUN_CONTEXT: RunContext = (_runId, body) => body();

/** While the tables are older than the operator controls, how often an acquire has the schema version read again. */
export const SCHEMA_RECHECK_MS = 60_000;

/** The gate's side the guard drives: what its own `migrate()` learnt, and a read ahead of the first fire. */
export interface SchemaGate {
  /**
   * This guard's own `migrate()` answered `versions`: at the controls' version or later, no read is
   * needed before the first acquire. Returns `versions`.
   */
  migrated(versions: SchemaVersions): SchemaVersions;
  /**
   * Reads the schema version now, unless it is known or being read: the connection warm-up calls it
   * a second before a quiet fire, so that the fire's first acquire does not wait for that read.
   * Resolves once read (never rejects); undefined when the version is known.
   */
  prepare(): Promise<void> | undefined;
}

/**
 * A lock store that reads the operator's pause only once the tables have its columns (migration
 * 004): a replica of this version started on tables nobody migrated yet still runs its jobs, as
 * docs/upgrading.md promises, with the statements of a store that names no pause column
 * (`without`). The first acquire reads the schema version (one read, no write); while the tables
 * are older, one acquire a minute reads it again in the background, so the pause takes effect
 * once `cronguard migrate` has run. A read that fails leaves the choice open: that acquire uses
 * `withControls` (whose own failure then says what is wrong), and the next one reads again.
 * Everything but the acquire is the same SQL in both stores and goes to `withControls`.
 * A guard whose own `migrate()` ran, or whose warm-up read the version before its first fire
 * (`SchemaGate`), sends its first acquire without waiting for that read: at a quiet schedule's
 * first fire it was a round trip before the probe.
 */
export function schemaGatedLockStore(
  withControls: LockStore,
  without: LockStore,
  hasControls: () => Promise<boolean>,
): { store: LockStore; gate: SchemaGate } {
  let known: boolean | undefined;
  let checkedAt = Number.NEGATIVE_INFINITY;
  let checking: Promise<boolean | undefined> | undefined;
  const check = (): Promise<boolean | undefined> => {
    checking ??= hasControls().then(
      (has) => {
        checkedAt = performance.now();
        // Once the columns are there, they stay: migrations only go forward.
        known = known === true || has;
        return known;
      },
      () => undefined,
    );
    void checking.finally(() => (checking = undefined));
    return checking;
  };
  const storeFor = async (request: AcquireRequest): Promise<LockStore> => {
    // A trigger exists only on tables that have the controls.
    if (request.trigger !== undefined || known === true) return withControls;
    if (known === undefined) return (await check()) === false ? without : withControls;
    if (performance.now() - checkedAt >= SCHEMA_RECHECK_MS) void check();
    return without;
  };
  const gated: LockStore = {
    synchronous: withControls.synchronous,
    async acquire(job: ResolvedJob, request: AcquireRequest): Promise<AcquireOutcome> {
      return (await storeFor(request)).acquire(job, request);
    },
    release: (job, token, outcome) => withControls.release(job, token, outcome),
    extend: (job, token, durationMs) => withControls.extend(job, token, durationMs),
    recordSkip: (job, request) => withControls.recordSkip(job, request),
  };
  // A batch never holds a trigger, so every acquire in it gets the same store; a store without
  // batches takes them one by one, as it would have had them alone.
  if (withControls.acquireMany !== undefined) {
    gated.acquireMany = async (acquires: readonly BatchedAcquire[]): Promise<AcquireOutcome[]> => {
      const [first] = acquires;
      if (first === undefined) return [];
      const store = await storeFor(first.request);
      if (store.acquireMany !== undefined) return store.acquireMany(acquires);
      return Promise.all(acquires.map(({ job, request }) => store.acquire(job, request)));
    };
  }
  const { releaseMany } = withControls;
  if (releaseMany !== undefined) gated.releaseMany = (releases) => releaseMany.call(withControls, releases);
  const { cancelAcquires } = withControls;
  if (cancelAcquires !== undefined) {
    gated.cancelAcquires = async () => {
      await Promise.all([cancelAcquires.call(withControls), without.cancelAcquires?.call(without)]);
    };
  }
  const gate: SchemaGate = {
    migrated: (versions) => {
      if (hasOperatorControls(versions)) known = true;
      return versions;
    },
    prepare: () => (known === undefined ? check().then(() => undefined) : undefined),
  };
  return { store: gated, gate };
}
