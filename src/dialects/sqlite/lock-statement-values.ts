// The named parameters of the SQLite lock statements (lock-store.ts), one type per statement
// shape, so that each statement's values can be checked against its text by reading them.

/** A job's lock row, and a slot as ISO text in UTC, or null. */
export interface SlotOfJob {
  readonly name: string;
  readonly slot: string | null;
}

/** A job's lock row as held by one execution; the token is also its run's id. */
export interface TokenOfJob {
  readonly name: string;
  readonly token: string;
}

/** The run a winner starts, or a skipped one. */
export interface RunValues extends SlotOfJob, TokenOfJob {
  readonly lockedBy: string;
  readonly lockAtMostForMs: number;
}
