import type { AcquireOutcome, AcquireRequest, BatchedAcquire, LockStore } from './dialect.js';
import type { ResolvedJob } from './job-options.js';

interface Queued extends BatchedAcquire {
  resolve(outcome: AcquireOutcome): void;
  reject(error: unknown): void;
}

/**
 * Coalesces the acquires a process starts together into one `LockStore.acquireMany` call, for a
 * store that has it. At a tick, node-cron fires every job due at that second from the same turn of
 * the event loop (its timers run one after another in the timers phase, and each fire reaches the
 * store with no I/O in between), so the acquires started in that turn wait for its end
 * (`setImmediate`, the check phase, which follows the timers phase without a wait) and go
 * together: one probe and one take for N jobs instead of N of each, and one pooled connection.
 * Nothing waits for a timer: an acquire alone in its turn is sent at the end of that turn, as it
 * is (`acquire`), and costs what it did. A second acquire of a job name already waiting in the
 * batch, and a trigger's acquire, go alone. If the batch fails, each acquire goes alone, so that
 * one job's failure never fails the others' and each gets its own error.
 */
export class AcquireBatcher {
  readonly #store: LockStore;
  #queued: Queued[] = [];
  readonly #names = new Set<string>();

  constructor(store: LockStore) {
    this.#store = store;
  }

  /** The store's answer to this acquire, alone or in the batch of its turn of the event loop. */
  acquire(job: ResolvedJob, request: AcquireRequest): Promise<AcquireOutcome> {
    if (this.#store.acquireMany === undefined || request.trigger !== undefined || this.#names.has(job.name)) {
      return this.#store.acquire(job, request);
    }
    return new Promise<AcquireOutcome>((resolve, reject) => {
      if (this.#queued.length === 0) setImmediate(() => this.#flush());
      this.#queued.push({ job, request, resolve, reject });
      this.#names.add(job.name);
    });
  }

  #flush(): void {
    const batch = this.#queued;
    this.#queued = [];
    this.#names.clear();
    const [only] = batch;
    if (batch.length === 1 && only !== undefined) {
      this.#alone(only);
      return;
    }
    let deciding: Promise<AcquireOutcome[]>;
    try {
      deciding = (this.#store.acquireMany as NonNullable<LockStore['acquireMany']>).call(this.#store, batch);
    } catch (error) {
      deciding = Promise.reject(error as Error);
    }
    void deciding.then(
      (outcomes) => {
        batch.forEach((queued, index) => {
          const outcome = outcomes[index];
          if (outcome === undefined) this.#alone(queued);
          else queued.resolve(outcome);
        });
      },
      // The batch took nothing (one statement, rolled back): each goes alone, and fails alone.
      () => {
        for (const queued of batch) this.#alone(queued);
      },
    );
  }

  #alone({ job, request, resolve, reject }: Queued): void {
    try {
      void this.#store.acquire(job, request).then(resolve, reject);
    } catch (error) {
      reject(error);
    }
  }
}
