// What test/fixtures/race-worker.ts reports of each round, and what explains a round's refusals on
// a stalled machine, from the times the contenders report.

/** One contender's round. */
export interface RoundResult {
  readonly round: number;
  /** When the contender asked (epoch ms). */
  readonly at: number;
  /** When `guard.run` answered: for a winner, once its lock was released. */
  readonly answered: number;
  readonly executed: boolean;
  readonly start?: number;
  readonly end?: number;
  readonly reason?: string;
  readonly error?: string;
}

/**
 * Whether another round's winner explains a refusal: 'locked' while that winner held the lock (its
 * ask to its release, or to lockAtLeastFor past its start when that is later; against the refused
 * ask to its answer: the server decided in between), or 'slot-done' once a later slot's winner had
 * asked (its take moves the slot watermark past this slot) before the refusal's answer.
 */
export function refusalExplained(refusal: RoundResult, all: readonly RoundResult[], lockAtLeastForMs = 0): boolean {
  const winners = all.filter((result) => result.executed && result.round !== refusal.round);
  const heldUntil = (winner: RoundResult): number => Math.max(winner.answered, (winner.start ?? winner.answered) + lockAtLeastForMs);
  if (refusal.reason === 'locked') return winners.some((winner) => winner.at <= refusal.answered && heldUntil(winner) >= refusal.at);
  if (refusal.reason === 'slot-done') return winners.some((winner) => winner.round > refusal.round && winner.at <= refusal.answered);
  return false;
}
