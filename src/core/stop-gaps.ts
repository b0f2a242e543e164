/**
 * Clean stops in the slot ledger (issue 35): when the last process that declared a job's schedule
 * stopped cleanly (its shutdown), the job has no slots from that stop until a process declares it
 * again. A process that died without a shutdown (kill -9, a crash) stopped nothing: its slots stay
 * expected, and are missed when no replica runs them.
 */

/** One process's declaration of one job's schedule, as `<prefix>declarations` keeps it. */
export interface Declaration {
  /** Its first declaration (the process started scheduling the job). */
  readonly startedAt: Date;
  /** Its last declaration (refreshed hourly while it runs). */
  readonly declaredAt: Date;
  /** When its shutdown stopped scheduling the job; null while it runs, or when it died. */
  readonly stoppedAt: Date | null;
}

/** A time no process declared the job after a clean stop: [from, until), until null while it lasts. */
export interface StopGap {
  readonly from: Date;
  readonly until: Date | null;
}

/**
 * The gaps `declarations` imply, oldest first. A clean stop opens a gap when no other process
 * declared the job at that instant; the gap ends at the next process's first declaration. A
 * process with no stop counts as declaring from its start until `declaredAt + deadAfterMs` (it
 * refreshes hourly: past that it died), so that a kill -9 never ends the expectation and a long
 * dead one does not hide the clean stops after it.
 */
export function stopGaps(declarations: readonly Declaration[], now: Date, deadAfterMs: number): StopGap[] {
  const endOf = (declaration: Declaration): number => {
    if (declaration.stoppedAt !== null) return declaration.stoppedAt.getTime();
    const deadAt = declaration.declaredAt.getTime() + deadAfterMs;
    return deadAt < now.getTime() ? deadAt : Number.POSITIVE_INFINITY;
  };
  const declaredAt = (at: number): boolean =>
    declarations.some((declaration) => declaration.startedAt.getTime() <= at && at < endOf(declaration));
  const gaps: StopGap[] = [];
  const stops = declarations
    .map((declaration) => declaration.stoppedAt?.getTime())
    .filter((at): at is number => at !== undefined)
    .sort((a, b) => a - b);
  for (const stop of stops) {
    if (declaredAt(stop)) continue;
    // Two processes stopping in the same gap: the first stop opened it.
    const last = gaps.at(-1);
    if (last !== undefined && (last.until === null || last.until.getTime() > stop)) continue;
    const next = declarations
      .map((declaration) => declaration.startedAt.getTime())
      .filter((at) => at > stop)
      .reduce((earliest, at) => Math.min(earliest, at), Number.POSITIVE_INFINITY);
    gaps.push({ from: new Date(stop), until: Number.isFinite(next) ? new Date(next) : null });
  }
  return gaps;
}

/** Whether `at` falls in one of `gaps`. */
export function inStopGap(gaps: readonly StopGap[], at: number): boolean {
  return gaps.some((gap) => gap.from.getTime() <= at && (gap.until === null || at < gap.until.getTime()));
}
