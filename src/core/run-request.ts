/**
 * What asked for one run. Every way of starting a run (a call, a scheduled fire, the node-cron
 * coordinator) describes it with one of these, and the `Runner` carries it to the acquire: a new
 * way to ask (a manual trigger, say, with who asked) is a new field here, turned into the lock
 * store's `AcquireRequest` in one place (`LockAcquirer.acquire`).
 */
export interface RunRequest {
  /**
   * The nominal scheduled time the run is for; null for an unscheduled call, for which a job with
   * a `cron` option claims the slot its expression last fired at (`Runner.runResolved`).
   */
  readonly slot: Date | null;
}

/** A run that no schedule asked for: a call by hand, a method decorator's call. */
export const UNSCHEDULED: RunRequest = Object.freeze({ slot: null });
