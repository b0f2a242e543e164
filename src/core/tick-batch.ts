/** How a `TickBatcher` sends what it was given: one item alone, or several together. */
export interface BatchSender<Item, Answer> {
  /** Sends one item alone. */
  one(item: Item): Promise<Answer>;
  /**
   * Sends two or more items together, answering in the order given. An answer left `undefined`
   * sends that item alone. A rejection means the batch applied nothing (one statement, or one
   * transaction, rolled back).
   */
  many(items: readonly Item[]): Promise<readonly (Answer | undefined)[]>;
  /**
   * What a failed batch becomes for each of its items: `alone` sends each item alone (so that one
   * item's failure never fails the others, and each gets its own error); `reject` rejects each
   * with the batch's error (for a caller that has its own retry).
   */
  readonly afterFailure: 'alone' | 'reject';
}

interface Queued<Item, Answer> {
  readonly item: Item;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/**
 * Coalesces the items a process hands over in one turn of the event loop. At a tick, node-cron
 * fires every job due at that second from the same turn (its timers run one after another in the
 * timers phase, and each fire reaches the store with no I/O in between); the releases of jobs whose
 * bodies end together come in one turn too. The first item of a turn goes at once, alone (`one`):
 * a lone item (a single job's acquire, a `guard.run` in a loop) costs what it cost without
 * batching, and waits for nothing. The items that follow it in the same turn wait for the end of
 * that turn (`setImmediate`, the check phase, which follows without a wait) and go together, one
 * `many` call for all of them (or `one`, for a single follower). So a tick of N jobs costs two sends
 * whatever N. When a tick's fires spread over several turns (hundreds of jobs, or a busy process),
 * the first item of a later turn joins that turn's batch while anything sent before it is still
 * unanswered: K turns cost K + 1 sends, not 2K.
 * An item whose key (a job name) was already sent or queued in this turn goes alone, at once: a
 * tick never fires the same job twice, but a loop of `guard.run` calls on one job does, and on
 * SQLite (whose statements answer within the turn they were asked in) every call of such a loop
 * would otherwise wait for the end of the turn.
 * A caller that knows which items come next (`expect`: the `guard.schedule` tasks due at the slot
 * that one of them fires) has them go together as soon as the last of them is queued, still in
 * that turn, not at its end: their answers are then on the way while node-cron runs the turn's
 * other timers. One that never comes only delays the others to the end of the turn.
 */
export class TickBatcher<Item, Answer> {
  readonly #sender: BatchSender<Item, Answer>;
  #queued: Queued<Item, Answer>[] = [];
  /** The keys sent or queued in this turn of the event loop. */
  readonly #keys = new Set<string>();
  /** Whether an item came in this turn of the event loop already: the next ones wait for its end. */
  #turnStarted = false;
  /** The sends (`one` or `many`) not answered yet. */
  #unanswered = 0;
  /** The keys `expect` announced for this turn and not queued yet. */
  readonly #expected = new Set<string>();

  constructor(sender: BatchSender<Item, Answer>) {
    this.#sender = sender;
  }

  /**
   * The items of these keys are about to be sent, in this turn: they are queued, the first one
   * too, and go together once the last of them is (or at the end of the turn).
   */
  expect(keys: Iterable<string>): void {
    for (const key of keys) if (!this.#keys.has(key)) this.#expected.add(key);
    if (this.#expected.size > 0) this.#startTurn();
  }

  /** The answer to `item`, sent alone or in the batch of its turn of the event loop. */
  send(item: Item, key: string): Promise<Answer> {
    if (this.#keys.has(key)) return this.#alone(item);
    this.#keys.add(key);
    const expected = this.#expected.delete(key);
    // The first of a turn goes at once, unless what went before it is still unanswered: a tick
    // whose fires spread over several turns (hundreds of jobs, a busy process) then sends one
    // batch per turn, not a lone item and a batch per turn.
    if (this.#startTurn() && this.#unanswered === 0) return this.#alone(item);
    const answer = new Promise<Answer>((resolve, reject) => {
      this.#queued.push({ item, resolve, reject });
    });
    if (expected && this.#expected.size === 0) this.#flush();
    return answer;
  }

  /** Marks the turn started (its batch goes at its end); true when it had not been. */
  #startTurn(): boolean {
    if (this.#turnStarted) return false;
    this.#turnStarted = true;
    setImmediate(() => this.#flush());
    return true;
  }

  #flush(): void {
    this.#turnStarted = false;
    const batch = this.#queued;
    this.#queued = [];
    this.#keys.clear();
    this.#expected.clear();
    if (batch.length === 0) return;
    const [only] = batch;
    if (batch.length === 1 && only !== undefined) {
      this.#alone(only.item).then(only.resolve, only.reject);
      return;
    }
    const answering = this.#counted(() => this.#sender.many(batch.map(({ item }) => item)));
    void answering.then(
      (answers) => {
        batch.forEach((queued, index) => {
          const answer = answers[index];
          if (answer === undefined) this.#alone(queued.item).then(queued.resolve, queued.reject);
          else queued.resolve(answer);
        });
      },
      (error: unknown) => {
        for (const queued of batch) {
          if (this.#sender.afterFailure === 'reject') queued.reject(error);
          else this.#alone(queued.item).then(queued.resolve, queued.reject);
        }
      },
    );
  }

  #alone(item: Item): Promise<Answer> {
    return this.#counted(() => this.#sender.one(item));
  }

  /** `send()`'s promise, counted in `#unanswered` until it settles (a throw is a rejection). */
  #counted<Result>(send: () => Promise<Result>): Promise<Result> {
    let sent: Promise<Result>;
    try {
      sent = send();
    } catch (error) {
      return Promise.reject(error as Error);
    }
    this.#unanswered += 1;
    const answered = (): void => {
      this.#unanswered -= 1;
    };
    sent.then(answered, answered);
    return sent;
  }
}
