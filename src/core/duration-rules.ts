/** One of a lock's two durations, with the option it came from, named as the caller names it (`coordinator.lockAtLeastFor`, `defaults.lockAtMostFor`, …). */
export interface NamedDuration {
  readonly option: string;
  readonly ms: number;
}

/**
 * The rule `lockAtLeastFor ≤ lockAtMostFor`, checked in one place with one message: the `TypeError`
 * naming both options (as the caller calls them), the job when there is one, and both values; or
 * `undefined` when the rule holds. Callers throw it, or log its message where a skip is the answer.
 */
export function lockAtLeastForError(
  lockAtLeastFor: NamedDuration,
  lockAtMostFor: NamedDuration,
  job: string | undefined,
): TypeError | undefined {
  if (lockAtLeastFor.ms <= lockAtMostFor.ms) return undefined;
  const ofJob = job === undefined ? '' : ` of job ${JSON.stringify(job)}`;
  return new TypeError(
    `Expected \`${lockAtLeastFor.option}\`${ofJob} (${lockAtLeastFor.ms} ms) ` +
      `to be at most \`${lockAtMostFor.option}\` (${lockAtMostFor.ms} ms)`,
  );
}
