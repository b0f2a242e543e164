import type { RunOutcome } from '../../core/dialect.js';
// The named parameters of the PostgreSQL lock statements (lock-store.ts), one type per statement
// shape, so that each statement's values can be checked against its text by reading them.

/** The parameters of an acquire's statements (the probe, the take, the full acquire), by name. */
export interface AcquireValues {
  readonly name: string;
  readonly lockAtMostForMs: number;
  readonly lockedBy: string;
  /** The execution's token, and its run's id. */
  readonly token: string;
  readonly slot: Date | null;
  /** acquireTimeout in whole ms, as text for set_config. */
  readonly lockTimeout: string;
}

/** A manual run's take (guard.trigger): the pending request's id instead of a slot. */
export type TriggerValues = Omit<AcquireValues, 'slot'> & { readonly triggerId: string };

export interface ReleaseValues {
  readonly name: string;
  readonly lockAtLeastForMs: number;
  readonly token: string;
  readonly status: RunOutcome['status'];
  readonly error: string | null;
}

export interface ExtendValues {
  readonly name: string;
  readonly durationMs: number;
  readonly token: string;
}

/** The batch probe (batch-acquire.ts): one element per acquire, in the same order. */
export interface BatchProbeValues {
  readonly names: string[];
  readonly slots: (Date | null)[];
}

/** The batch take (batch-acquire.ts): `AcquireValues` as arrays, one element per acquire, in the same order. */
export interface BatchTakeValues extends BatchProbeValues {
  readonly tokens: string[];
  readonly lockAtMostForMs: number[];
  readonly lockedBy: string[];
  readonly lockTimeout: string;
}

/** The batch release (batch-release.ts): `ReleaseValues` as arrays, one element per release, in the same order. */
export interface BatchReleaseValues {
  readonly names: string[];
  readonly tokens: string[];
  readonly lockAtLeastForMs: number[];
  readonly statuses: RunOutcome['status'][];
  readonly errors: (string | null)[];
}
