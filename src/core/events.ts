import { EventEmitter } from 'node:events';
import { messageOf, type GuardError } from './errors.js';
import type { Logger } from './logger.js';
import type { SkipReason } from './run-result.js';

/** What each guard event carries. `runId` is the execution's token, the `id` of its history row. */
export interface GuardEventMap {
  /** An execution took its job's lock. */
  acquired: [{ job: string; runId: string; slot: Date | null }];
  /** An execution did not run: `locked`, `slot-done`, `paused`, or `error` (with the error). */
  skipped: [{ job: string; slot: Date | null; reason: SkipReason; error?: GuardError }];
  /** A job returned. */
  succeeded: [{ job: string; runId: string; durationMs: number }];
  /** A job threw (its own error, which `run` also rejects with). */
  failed: [{ job: string; runId: string; durationMs: number; error: unknown }];
  /**
   * A job stopped because its signal aborted: it rejected with the signal's `reason` (or an error
   * whose `cause` chain holds it), which `run` also rejects with. Recorded `cancelled`, not `failed`.
   */
  cancelled: [{ job: string; runId: string; durationMs: number; reason: GuardError; error: unknown }];
  /**
   * A node-cron coordinator stopped waiting for a fire's completion, which never came within twice
   * lockAtMostFor (its lock had long expired). Its history row stays `running` until the job's next
   * run marks it `abandoned`.
   */
  abandoned: [{ job: string; runId: string; durationMs: number }];
  /** The lock was given back (`released: false`: it had been lost, see `lock-lost`). */
  released: [{ job: string; runId: string; released: boolean }];
  /** The lock was found taken by another execution, at an extend or at the release. */
  'lock-lost': [{ job: string; runId: string; during: 'extend' | 'release' }];
  /** A job ran past its lock's expiry: another execution may have overlapped it. */
  overran: [{ job: string; runId: string; durationMs: number; lockAtMostForMs: number }];
  /**
   * This guard paused a job (`guard.pause`, or `autoPause` after that many failed runs in a row:
   * `auto` true): no replica starts it until `resume` or `until`.
   */
  paused: [{ job: string; by: string; reason: string | null; until: Date | null; auto: boolean }];
  /**
   * The winner of `slot` found slots before it that no replica ran (since the previous slot that
   * ran): `slots`, oldest first (the newest 10,000 of a longer gap), and how many there were.
   * Once per gap, on the replica that took the slot after it. Needs the history and a schedule.
   */
  missed: [{ job: string; runId: string; slot: Date; slots: Date[]; count: number }];
  /** A run started more than lateAfter (a tenth of its interval, 1 s to 1 min) after its slot, on this replica's clock. */
  late: [{ job: string; runId: string; slot: Date; delayMs: number; lateAfterMs: number }];
  /** A database failure of the guard itself (acquire, extend, release, history). */
  error: [{ job?: string; error: GuardError }];
}

export type GuardEventName = keyof GuardEventMap;

/**
 * The guard's events. Emitting never throws into the guard: with no listener nothing is built or
 * sent (Node would throw on an unheard 'error'), and a listener that throws is logged.
 */
export class GuardEvents {
  // Untyped inside: the public methods above carry the types.
  readonly #emitter = new EventEmitter();
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  on<E extends GuardEventName>(event: E, listener: (...payload: GuardEventMap[E]) => void): void {
    this.#emitter.on(event, listener as (...args: unknown[]) => void);
  }

  off<E extends GuardEventName>(event: E, listener: (...payload: GuardEventMap[E]) => void): void {
    this.#emitter.off(event, listener as (...args: unknown[]) => void);
  }

  /** Whether anyone listens: lets the hot path skip building a payload nobody reads. */
  has(event: GuardEventName): boolean {
    return this.#emitter.listenerCount(event) > 0;
  }

  emit<E extends GuardEventName>(event: E, ...payload: GuardEventMap[E]): void {
    if (!this.has(event)) return;
    try {
      this.#emitter.emit(event, ...payload);
    } catch (error) {
      this.#logger.error(`A "${event}" listener threw: ${messageOf(error)}`);
    }
  }
}
