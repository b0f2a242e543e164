import type { AcquireOutcome, AcquireRequest, BatchedAcquire, BatchedRelease, LockStore, RunOutcome } from './dialect.js';
import type { ResolvedJob } from './job-options.js';
import { noteFireStep } from './fire-timeline.js';
import { TickBatcher } from './tick-batch.js';

/**
 * Sends the acquires a process starts in one turn of the event loop as one `LockStore.acquireMany`
 * call, for a store that has it (core/tick-batch.ts): one probe and one take for N jobs instead of
 * N of each. A trigger's acquire, and a second acquire of a job name already in the batch, go
 * alone. If the batch fails, each acquire goes alone, and fails alone.
 */
export class AcquireBatcher {
  readonly #store: LockStore;
  readonly #batcher: TickBatcher<BatchedAcquire, AcquireOutcome> | undefined;

  constructor(store: LockStore) {
    this.#store = store;
    const acquireMany = store.acquireMany?.bind(store);
    this.#batcher =
      acquireMany === undefined
        ? undefined
        : new TickBatcher({
            one: ({ job, request }) => {
              noteFireStep('sent', job.name, request.slot);
              return store.acquire(job, request);
            },
            many: (acquires) => {
              noteFireStep('sent', () => acquires.map(({ job }) => job.name), acquires[0]?.request.slot);
              return acquireMany(acquires);
            },
            afterFailure: 'alone',
          });
  }

  /** The acquires of these jobs come next, in this turn: they go together as soon as the last has come. */
  expectTogether(names: readonly string[]): void {
    this.#batcher?.expect(names);
  }

  /** The store's answer to this acquire, alone or in the batch of its turn of the event loop. */
  acquire(job: ResolvedJob, request: AcquireRequest): Promise<AcquireOutcome> {
    if (this.#batcher === undefined || request.trigger !== undefined) {
      noteFireStep('sent', job.name, request.slot);
      return this.#store.acquire(job, request);
    }
    return this.#batcher.send({ job, request }, job.name);
  }
}

/**
 * Sends the releases of one turn of the event loop (jobs whose bodies ended together) as one
 * `LockStore.releaseMany` call, for a store that has it. A failed batch rejects each release with
 * its error: the caller's retry (core/release.ts) then sends each alone (`alone`), so that a batch
 * whose reply was lost after it committed is retried exactly as a single release would be.
 */
export class ReleaseBatcher {
  readonly #store: LockStore;
  readonly #batcher: TickBatcher<BatchedRelease, boolean> | undefined;

  constructor(store: LockStore) {
    this.#store = store;
    const many = store.releaseMany?.bind(store);
    this.#batcher =
      many === undefined
        ? undefined
        : new TickBatcher({ one: ({ job, token, outcome }) => store.release(job, token, outcome), many, afterFailure: 'reject' });
  }

  /** The store's answer to this release: in the batch of its turn, or alone when `alone` (a retry). */
  release(job: ResolvedJob, token: string, outcome: RunOutcome, alone: boolean): Promise<boolean> {
    if (this.#batcher === undefined || alone) return this.#store.release(job, token, outcome);
    return this.#batcher.send({ job, token, outcome }, job.name);
  }
}
