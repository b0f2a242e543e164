import type { AcquireRequest } from './dialect.js';

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
  /**
   * The pending "run now" request this run answers (`guard.trigger`, through the trigger poll):
   * its take requires and clears the lock row's `trigger_id`, so one replica runs it; with `force`
   * it runs even while the job is paused. Absent for every other run.
   */
  readonly trigger?: AcquireRequest['trigger'];
}

/** A run that no schedule asked for: a call by hand, a method decorator's call. */
export const UNSCHEDULED: RunRequest = Object.freeze({ slot: null });
