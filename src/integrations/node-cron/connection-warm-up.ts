import { CompiledQuery, type Kysely } from 'kysely';
import type { ScheduledTask } from 'node-cron';
import { MAX_TIMER_MS } from '../../core/timeout.js';

/** What a connection warm-up sends on each connection. */
const SELECT_ONE = CompiledQuery.raw('SELECT 1');

/**
 * Opens `connections` connections of the pool behind `db`: that many statements at once, one of
 * them `read` when given (a read the fire would otherwise wait for, already sent on the pool).
 */
export async function openConnections(db: Kysely<unknown>, connections: number, read?: Promise<void>): Promise<void> {
  const selects = Array.from({ length: read === undefined ? connections : connections - 1 }, () => db.executeQuery(SELECT_ONE));
  await Promise.all([read, ...selects]);
}

/** How long before a fire the connections are opened. */
const LEAD_MS = 1_000;
/** Only a fire this long after the previous one is warmed for: a pool idle that long may have closed its connections. */
const QUIET_MS = 5_000;
/**
 * At most this many connections are opened, whatever the number of runs due: the statements a tick
 * sends at once. The first acquire of a tick goes alone and the others together (core/tick-batch.ts),
 * and so do the releases and the slot ledger's reads after the wins: three at a time at most.
 */
const TICK_CONNECTIONS = 3;
/**
 * While fires come less than QUIET_MS apart, the next fires are looked at no more often than this:
 * node-cron computes a task's next fire in about 50 µs, so a thousand once-a-second tasks would
 * otherwise cost 50 ms every second. Less than QUIET_MS - LEAD_MS, so a quiet fire is still seen in time.
 */
const BUSY_RECHECK_MS = 3_000;

/**
 * Opens the connections a scheduled fire will need a second before it, when the fire follows a
 * quiet spell (the guard's first fire, or a schedule of minutes or hours): without it, every run of
 * that fire would first open its connection (a TCP and authentication round trip each, all at the
 * same instant on every replica), which measured about 100 ms of start delay at a minute boundary.
 * Busy schedules (fires less than 5 s apart) keep their connections open and are left alone.
 * Only a head start: a warm-up that fails changes nothing, and the fire reports its own errors.
 */
export class ConnectionWarmUp {
  readonly #tasks: ReadonlySet<ScheduledTask>;
  readonly #open: (connections: number) => Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  /** The last fire time (epoch ms) this warm-up has planned for. */
  #lastFireAt = Number.NEGATIVE_INFINITY;
  #stopped = false;
  #armRequested = false;

  /** `open` runs `connections` statements at once on the guard's pool, which opens that many connections. */
  constructor(tasks: ReadonlySet<ScheduledTask>, open: (connections: number) => Promise<void>) {
    this.#tasks = tasks;
    this.#open = open;
  }

  /** Plans the next warm-up once the tasks scheduled in this turn of the event loop are all added. */
  requestArm(): void {
    if (this.#armRequested) return;
    this.#armRequested = true;
    setImmediate(() => {
      this.#armRequested = false;
      this.arm();
    }).unref();
  }

  /** Plans the next warm-up from the tasks' next fires. */
  arm(): void {
    clearTimeout(this.#timer);
    if (this.#stopped) return;
    const now = Date.now();
    const fires: number[] = [];
    let next = Number.POSITIVE_INFINITY;
    for (const task of this.#tasks) {
      // A stopped task reports no next run; a destroyed one has left the set (see scheduleJob).
      const at = task.getNextRun()?.getTime();
      if (at === undefined || at <= now) continue;
      fires.push(at);
      next = Math.min(next, at);
    }
    if (fires.length === 0) return;
    const quiet = next - this.#lastFireAt >= QUIET_MS;
    // The runs of tasks that fire together (within the lead) need a connection each, up to the
    // statements a tick sends at once.
    const due = Math.min(TICK_CONNECTIONS, fires.filter((at) => at - next < LEAD_MS).length);
    // `next` fired: no later fire can be quiet unless it comes QUIET_MS after this one (a busy
    // schedule may have fired again since: counting from `next` can only warm up once too often).
    const afterFire = (): void => {
      this.#lastFireAt = next;
      this.arm();
    };
    if (!quiet) {
      this.#wait(Math.max(next + 1, now + BUSY_RECHECK_MS) - now, afterFire);
      return;
    }
    this.#wait(next - LEAD_MS - now, () => {
      this.#open(due).then(
        () => undefined,
        () => undefined,
      );
      this.#wait(next + 1 - Date.now(), afterFire);
    });
  }

  /** No more warm-ups (the guard is shutting down). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #wait(delayMs: number, then: () => void): void {
    const delay = Math.max(0, delayMs);
    // A fire further away than a timer can wait: look again when the timer is up.
    this.#timer = delay > MAX_TIMER_MS ? setTimeout(() => this.arm(), MAX_TIMER_MS) : setTimeout(then, delay);
    this.#timer.unref();
  }
}
