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

// The batch statements (batch-acquire.ts, batch-release.ts) read their jobs from one JSON text,
// an array with one element per job (json_each): a bound value, never SQL text.

/** The probe of many jobs: elements `{ name, slot }`. */
export interface BatchProbeValues {
  readonly requests: string;
}

/** The take of many jobs: elements `{ name, token, slot, lockAtMostFor }`, and the guard's lockedBy. */
export interface BatchTakeValues {
  readonly requests: string;
  readonly lockedBy: string;
}

/** Why the losers of a take lost: elements `{ name, slot }`. */
export interface BatchLossValues {
  readonly losers: string;
}

/** The runs the winners took over from: an array of their tokens. */
export interface BatchAbandonValues {
  readonly previousTokens: string;
}

/** The winners' run rows: elements `{ name, token, slot, startedAt, lockUntil, lockAtMostForMs }`. */
export interface BatchStartValues {
  readonly winners: string;
  readonly lockedBy: string;
}

/** The releases of many jobs: elements `{ name, token, lockAtLeastFor }`. */
export interface BatchReleaseValues {
  readonly releases: string;
}

/** The run rows the releases finish: elements `{ token, status, error, released }`. */
export interface BatchFinishValues {
  readonly finishes: string;
}
