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
