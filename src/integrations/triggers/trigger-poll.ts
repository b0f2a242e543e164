import { messageOf } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

/** A pending "run now" request, as the poll reads it. */
export interface TriggerRequest {
  readonly job: string;
  readonly id: string;
  readonly by: string;
  readonly force: boolean;
}

/**
 * What answering a request did: `ran` (this replica ran it), `busy` (the lock was held: another
 * run is going, or another replica took the request), `refused` (the job is paused; the request
 * waits for a resume).
 */
export type TriggerAnswer = 'ran' | 'busy' | 'refused';

/** Runs one request on this replica: the take that clears it decides whether this replica runs it. */
export type TriggeredRun = (request: TriggerRequest) => Promise<TriggerAnswer>;

/** What the poll needs from its guard. */
export interface TriggerPollHost {
  /** `controlPollInterval`. */
  readonly intervalMs: number;
  readonly logger: Logger;
  /** Every pending request of the guard's tables, in one statement. */
  pending(): Promise<TriggerRequest[]>;
  /**
   * Whether an error means the database is read-only (a standby refuses LISTEN "during recovery"):
   * the acquires say so once; the poll goes on quietly.
   */
  isReadOnly(error: unknown): boolean;
  /** Hears of a request at once (PostgreSQL LISTEN); resolves with a stop function, or undefined. */
  listen?(wake: () => void, lost: (error: unknown) => void): Promise<(() => Promise<void>) | undefined>;
}

/** After a busy answer, asks again this soon (the lock is usually free within a job's run). */
const BUSY_RETRY_MS = 250;
/** Busy retries per request before the poll falls back to its interval. */
const MAX_BUSY_RETRIES = 40;

/**
 * A replica's watch for "run now" requests on the jobs it schedules: one statement every
 * `controlPollInterval` for all of them (none while it schedules nothing), woken at once by the
 * database where it can notify (PostgreSQL). Polls never overlap. A request is answered by one
 * run attempt at a time per job in this process; across replicas, the take that clears the
 * request lets exactly one of them run it.
 */
export class TriggerPoll {
  readonly #host: TriggerPollHost;
  readonly #jobs = new Map<string, TriggeredRun[]>();
  /** Jobs whose request this process is answering now. */
  readonly #answering = new Set<string>();
  /** Busy retries per request id. */
  readonly #retries = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #polling: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #listening: Promise<(() => Promise<void>) | undefined> | undefined;
  #failing = false;

  constructor(host: TriggerPollHost) {
    this.#host = host;
  }

  /** Watches `job` for requests while this replica schedules it; returns the function that stops watching. */
  register(job: string, run: TriggeredRun): () => void {
    if (this.#stopped) return () => undefined;
    const runs = this.#jobs.get(job) ?? [];
    runs.push(run);
    this.#jobs.set(job, runs);
    if (this.#timer === undefined) this.#arm(this.#host.intervalMs);
    this.#listen();
    return () => {
      const left = (this.#jobs.get(job) ?? []).filter((each) => each !== run);
      if (left.length === 0) this.#jobs.delete(job);
      else this.#jobs.set(job, left);
      if (this.#jobs.size > 0) return;
      // Nothing left to watch: no timer, and no listening connection keeping the process alive.
      clearTimeout(this.#timer);
      this.#timer = undefined;
      void this.#unlisten();
    };
  }

  /** Looks for requests now (woken by a NOTIFY, or retrying); one asked for during a poll follows it. */
  poll(): Promise<void> {
    if (this.#polling !== undefined) {
      this.#again = true;
      return this.#polling;
    }
    this.#polling = this.#pollOnce().finally(() => {
      this.#polling = undefined;
      if (this.#again && !this.#stopped) {
        this.#again = false;
        void this.poll();
      }
    });
    return this.#polling;
  }

  /**
   * Stops polling and listening. Runs already started finish on their own (the guard waits for
   * them); a poll under way is not waited for, so that a database that does not answer cannot hold
   * shutdown back, and the listening connection gets at most a second to close.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await Promise.race([this.#unlisten(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
  }

  async #unlisten(): Promise<void> {
    const listening = this.#listening;
    this.#listening = undefined;
    const unlisten = await listening?.catch(() => undefined);
    await unlisten?.().catch(() => undefined);
  }

  #arm(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.poll(), ms);
    // The poll never keeps a process alive: its schedules do, if anything.
    this.#timer.unref();
  }

  #listen(): void {
    if (this.#listening !== undefined || this.#host.listen === undefined) return;
    const lost = (error: unknown): void => {
      if (this.#stopped) return;
      if (!this.#host.isReadOnly(error)) {
        this.#host.logger.warn(
          `Listening for "run now" requests failed (${messageOf(error)}); polling every ${this.#host.intervalMs} ms meanwhile`,
        );
      }
      const listening = this.#listening;
      this.#listening = undefined;
      void listening?.then((unlisten) => unlisten?.()).catch(() => undefined);
    };
    this.#listening = this.#host
      .listen(() => void this.poll(), lost)
      .catch((error: unknown) => {
        lost(error);
        return undefined;
      });
  }

  async #pollOnce(): Promise<void> {
    if (this.#stopped || this.#jobs.size === 0) return;
    try {
      // A listener lost earlier is opened again, at most once per poll.
      this.#listen();
      const requests = await this.#host.pending();
      if (this.#failing) this.#host.logger.warn('Looking for "run now" requests works again');
      this.#failing = false;
      for (const request of requests) {
        const run = this.#jobs.get(request.job)?.[0];
        if (run === undefined || this.#answering.has(request.job)) continue;
        this.#answering.add(request.job);
        // Not awaited: a long job holds back neither the other jobs' requests nor the next poll.
        void run(request)
          .then((answer) => {
            if (answer !== 'busy') {
              this.#retries.delete(request.id);
              return;
            }
            const retries = (this.#retries.get(request.id) ?? 0) + 1;
            this.#retries.set(request.id, retries);
            if (retries <= MAX_BUSY_RETRIES && !this.#stopped) this.#arm(Math.min(BUSY_RETRY_MS, this.#host.intervalMs));
          })
          .finally(() => this.#answering.delete(request.job));
      }
    } catch (error) {
      if (this.#stopped) return;
      // Logged once per outage, not at every poll; the acquires report the database's state too.
      if (!this.#failing) this.#host.logger.error(`Looking for "run now" requests failed: ${messageOf(error)}`);
      this.#failing = true;
    } finally {
      // The next poll; a busy answer arrives later and brings it forward.
      if (!this.#stopped && this.#jobs.size > 0) this.#arm(this.#host.intervalMs);
    }
  }
}
