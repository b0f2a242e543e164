import type { Logger } from './logger.js';

/** At most one line a minute per job while its acquires keep failing. */
export const OUTAGE_SUMMARY_INTERVAL_MS = 60_000;

/** One job's run of failed acquires: when it began, how many failed, and when a line last went out. */
interface Outage {
  readonly since: number;
  failures: number;
  /** Failures since the last line logged (the first failure, or the last summary). */
  unlogged: number;
  loggedAt: number;
}

/**
 * Logs the acquire failures of one guard without flooding its logger: with the database down,
 * every job fails at every tick (100 jobs every second, 100 lines a second). A job's first failure
 * is logged as it is; while the failures last, at most one summary line a minute says how many runs
 * were skipped; the first acquire that gets an answer again logs one line. Only the log is thinned:
 * every failure still emits its `error` and `skipped` events, and so reaches the metrics.
 *
 * A read-only database (`failedReadOnly`) fails every job's acquire for one reason: said once per
 * guard, not once per job, then summed up as any outage, until an acquire gets an answer.
 *
 * The minute is counted on the wall clock (`Date.now()`): this only spaces log lines, and a clock
 * that steps back lets the next summary out at once rather than holding it back.
 */
export class AcquireFailureLog {
  readonly #logger: Logger;
  readonly #outages = new Map<string, Outage>();
  /** The guard-wide outage of a read-only database, if one is under way. */
  #readOnly: Outage | undefined;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** An acquire of `job` failed and its run was skipped; `message` says why. */
  failed(job: string, message: string): void {
    const outage = this.#outages.get(job);
    if (outage === undefined) this.#outages.set(job, this.#began(message));
    else this.#again(outage, `Job ${JSON.stringify(job)} still cannot take its lock`, message);
  }

  /** An acquire failed because the database is read-only: one line for all the guard's jobs. */
  failedReadOnly(message: string): void {
    if (this.#readOnly === undefined) this.#readOnly = this.#began(message);
    else this.#again(this.#readOnly, 'The database is still read-only', message);
  }

  #began(message: string): Outage {
    const now = Date.now();
    this.#logger.error(message);
    return { since: now, failures: 1, unlogged: 0, loggedAt: now };
  }

  #again(outage: Outage, headline: string, message: string): void {
    const now = Date.now();
    outage.failures += 1;
    outage.unlogged += 1;
    if (now - outage.loggedAt < OUTAGE_SUMMARY_INTERVAL_MS && now >= outage.loggedAt) return;
    this.#logger.error(
      `${headline}: ${outage.unlogged} more run(s) skipped since the last message, ` +
        `${outage.failures} since ${new Date(outage.since).toISOString()}. Latest: ${message}`,
    );
    outage.unlogged = 0;
    outage.loggedAt = now;
  }

  /** An acquire of `job` got the database's answer (taken, or held elsewhere): an outage, if any, is over. */
  answered(job: string): void {
    const readOnly = this.#readOnly;
    if (readOnly !== undefined) {
      this.#readOnly = undefined;
      this.#logger.warn(
        `The database takes writes again: ${readOnly.failures} run(s) were skipped since ${new Date(readOnly.since).toISOString()} because it was read-only`,
      );
    }
    const outage = this.#outages.get(job);
    if (outage === undefined) return;
    this.#outages.delete(job);
    this.#logger.warn(
      `Job ${JSON.stringify(job)} can take its lock again: ${outage.failures} run(s) were skipped since ` +
        `${new Date(outage.since).toISOString()} because taking the lock failed`,
    );
  }
}
