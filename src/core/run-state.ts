import { setTimeout as sleep } from 'node:timers/promises';
import { ReleaseBatcher } from './acquire-batch.js';
import type { Dialect, LockStore } from './dialect.js';
import type { GuardEvents } from './events.js';
import type { RunEnding } from './run-result.js';
import type { ResolvedDefaults, ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';
import { MAX_TIMER_MS } from './timeout.js';

/** Calls a job inside its run's context (its OpenTelemetry span), and returns what it returned. */
export type RunContext = <T>(runId: string, job: () => T) => T;

/**
 * What the guard does around each run beyond the lock, called by name at fixed points of the run
 * path, in this order: `won` right after a win (`core/acquire.ts`), `inRunContext` around the job's
 * body (`core/runner.ts`), `finished` once the finish's release has answered or given up
 * (`core/held-lock.ts`). The guard's implementation (`GuardRunSteps`, guard/guard-runner.ts) reads
 * as the list of them. This is the one place the guard hands the core something to call: what the
 * steps do (the slot ledger, the replica's presence, the auto-pause count, the retention prune,
 * telemetry) lives in layers the core may not import. A step never throws and never holds the run
 * up: work it starts in the background is tracked, so that shutdown waits for it.
 */
export interface RunSteps {
  /** After a win, before the job runs (every way of starting a run: the coordinator's takes too). */
  won(job: ResolvedJob, runId: string, slot: Date | null): void;
  /** Runs the job's body inside the run's context (its telemetry span); returns what `body` returned. */
  inRunContext: RunContext;
  /**
   * After a run's finish: `ending` is how it ended, `released` whether the release statement
   * answered (its history row then says the outcome), false when it failed or took too long.
   */
  finished(job: ResolvedJob, ending: RunEnding, released: boolean): void;
}

/**
 * What a guard's runs depend on and never change: the lock store on its database, its events, its
 * logger, the steps it takes around each run. The `Runner` is built with it; the run state
 * (`RunState`, below: what is in flight, the released locks' hints, closed or ended; and the
 * executions running now) is the Runner's own.
 */
export interface RunDependencies {
  readonly store: LockStore;
  readonly dialect: Dialect;
  readonly lockedBy: string;
  readonly logger: Logger;
  readonly events: GuardEvents;
  /** The guard's defaults, which fill the gaps in a job's options. */
  readonly defaults: ResolvedDefaults;
  /** Whether a skipped execution gets a `skipped` history row. */
  readonly recordSkips: boolean;
  /** How long an acquire, an extend or a release may take before the guard gives up on it. */
  readonly statementTimeoutMs: number;
  /** What the guard does after a win, around the body and after the finish, called by name. */
  readonly steps: RunSteps;
}

/**
 * A guard's run state, shared by its `Runner` and the parts that take, hold and release its locks
 * (`LockAcquirer`, `HeldLock`, `releaseLock`): what the runs depend on, the work in flight (what
 * shutdown waits for), the locks it released itself (the probe-skipping hint), the releases of one
 * turn, and whether the runner is closed or its connections are ending. Made by the `Runner`;
 * nothing outside core/ sees it.
 */
export class RunState {
  /** The releases that end in one turn of the event loop, sent together where the store can. */
  readonly releases: ReleaseBatcher;
  /** The jobs whose lock this runner released itself: their next acquire skips the probe. */
  readonly releasedLocks = new ReleasedLocks();
  /** Runs, held locks and late give-backs, for shutdown to wait for. */
  readonly inFlight = new InFlight();
  /** Aborted by `end`: the guard's connections are ending. */
  readonly #stopped = new AbortController();
  #closed = false;

  constructor(readonly dependencies: RunDependencies) {
    this.releases = new ReleaseBatcher(dependencies.store);
  }

  /** Whether the runner is closed (shutting down): no new run is admitted. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Aborts once shutdown has stopped waiting for work in flight and ends the guard's connections:
   * a release that fails after that is not retried (nor waited for: the process may exit).
   */
  get stopped(): AbortSignal {
    return this.#stopped.signal;
  }

  /** Admits no new run from now on. */
  close(): void {
    this.#closed = true;
  }

  /** The guard's connections are ending: aborts `stopped`. */
  end(): void {
    this.#stopped.abort();
  }

  /** Keeps `work` in flight (shutdown waits for it, up to its timeout), and returns it. */
  track<T>(work: Promise<T>): Promise<T> {
    return this.inFlight.track(work);
  }
}

/** The work a guard has under way (runs, and locks a node-cron coordinator holds), for shutdown. */
export class InFlight {
  readonly #pending = new Set<Promise<unknown>>();

  /** Tracks `work` until it settles, and returns it. */
  track<T>(work: Promise<T>): Promise<T> {
    this.#pending.add(work);
    const forget = (): void => void this.#pending.delete(work);
    work.then(forget, forget);
    return work;
  }

  get size(): number {
    return this.#pending.size;
  }

  /** Waits until nothing is under way, or `timeoutMs`; resolves with how many are still pending. */
  async drain(timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    while (this.#pending.size > 0) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) break;
      const timer = sleep(Math.min(remaining, MAX_TIMER_MS), undefined, { ref: false });
      await Promise.race([Promise.allSettled([...this.#pending]), timer]);
    }
    return this.#pending.size;
  }
}

/** How many job names a guard remembers; past that, the oldest is forgotten (it only costs a probe). */
const MAX_REMEMBERED = 10_000;

/**
 * The jobs whose lock this guard released itself, and from when (performance.now()) each lock may
 * be free again: at once, or once lockAtLeastFor has passed since the acquire was sent (the
 * database counts from locked_at, a round trip later, so a take sent in between loses). The next
 * acquire of such a job skips the probe and goes straight to the atomic take, since the read would
 * most likely say "free": a winner then sends one statement fewer. Only a hint: the take alone
 * decides. If another replica took the lock meanwhile, the take loses and writes nothing (it waits
 * for the row's lock on MySQL, and for the write lock on SQLite, which a probe would not); a hint
 * is used once, so a guard that lost probes again next time.
 */
export class ReleasedLocks {
  readonly #freeAt = new Map<string, number>();

  /** Remembers that this guard released `name`'s lock, which is free from `freeAt` on. */
  released(name: string, freeAt: number): void {
    this.#freeAt.delete(name);
    this.#freeAt.set(name, freeAt);
    if (this.#freeAt.size > MAX_REMEMBERED) {
      const oldest = this.#freeAt.keys().next();
      if (oldest.done !== true) this.#freeAt.delete(oldest.value);
    }
  }

  /** Whether the next acquire of `name` may skip the probe. Forgets the hint either way. */
  takeExpectFree(name: string): boolean {
    const freeAt = this.#freeAt.get(name);
    if (freeAt === undefined) return false;
    this.#freeAt.delete(name);
    return performance.now() >= freeAt;
  }
}
