import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_TIMER_MS } from './timeout.js';
import type { Logger } from './logger.js';
import type { ResolvedJob } from './job-options.js';

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

/**
 * Warns once per job name when a decorated job has neither `cron` nor `lockAtLeastFor`: a method
 * decorator is called by someone else's scheduler, and without a slot a replica whose timer fires
 * a few ms late takes the lock after the first replica's fast run released it, and runs that fire
 * again.
 */
export class UnslottedWarning {
  readonly #warned = new Set<string>();

  constructor(private readonly logger: Logger) {}

  check(job: ResolvedJob): void {
    if (job.cron !== undefined || job.lockAtLeastForMs > 0 || this.#warned.has(job.name)) return;
    this.#warned.add(job.name);
    this.logger.warn(
      `Job "${job.name}" is decorated without \`cron\` and with lockAtLeastFor 0: when a scheduler calls it on ` +
        'several replicas, a fast job can run twice for one fire (a replica whose timer fires late takes the lock after ' +
        'the first run released it). Set `cron` to the expression the scheduler fires it on (in NestJS, use @GuardedCron ' +
        "from 'cronguard/nestjs'), or a lockAtLeastFor longer than the replicas' timer lag, such as '5s'.",
    );
  }
}
