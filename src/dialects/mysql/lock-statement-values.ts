import type { RunOutcome } from '../../core/dialect.js';

// The named parameters of the MySQL/MariaDB lock statements (lock-store.ts), one interface per
// statement shape, so that each statement's values can be checked against its text by reading them.

/** A job's lock row, and a slot as DATETIME(3) text in UTC (`mysqlTime`), or null. */
export interface SlotOfJob {
  readonly name: string;
  readonly slot: string | null;
}

/** A job's lock row as held by one execution. */
export interface TokenOfJob {
  readonly name: string;
  readonly token: string;
}

export interface TakeValues extends SlotOfJob, TokenOfJob {
  readonly lockAtMostForMicros: number;
  readonly lockedBy: string;
}

/** A manual run's take (guard.trigger): the pending request's id instead of a slot. */
export interface TriggerValues extends TokenOfJob {
  readonly lockAtMostForMicros: number;
  readonly lockedBy: string;
  readonly triggerId: string;
}

export interface StartValues extends SlotOfJob, TokenOfJob {
  readonly lockAtMostForMs: number;
}

export interface ReleaseValues extends TokenOfJob {
  readonly lockAtLeastForMicros: number;
  readonly status: RunOutcome['status'];
  readonly error: string | null;
}

export interface ExtendValues extends TokenOfJob {
  readonly durationMicros: number;
}
