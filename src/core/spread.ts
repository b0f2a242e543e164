import { createHash } from 'node:crypto';
import type { CronSlots } from './cron-slots.js';
import { describeValue } from './errors.js';
import { parseDuration, type DurationInput } from './duration.js';

/**
 * The offset of a job inside its `spread` window, in whole milliseconds from 0 to `spreadMs` − 1:
 * the first 48 bits of the SHA-1 of the job's name (UTF-8) modulo the window. A function of the
 * name and the window only, so every replica, every restart and every reader of the ledger
 * computes the same offset; SHA-1 rather than a short hash so that names differing by one
 * character land far apart. 0 without a window.
 */
export function spreadOffsetMs(name: string, spreadMs: number | null): number {
  if (spreadMs === null || spreadMs <= 0) return 0;
  const digest = createHash('sha1').update(name, 'utf8').digest();
  return digest.readUIntBE(0, 6) % spreadMs;
}

/**
 * When a spread run of `slot` starts (ms since the epoch): the slot plus the job's offset, counted
 * from the slot rather than from the timer that fired it (a late timer does not push the start
 * further). An offset as long as the gap to the next slot (a schedule irregular past what `spread`
 * was checked against, a DST night) is cut to just before the next slot, so the runs still follow
 * their slots.
 */
export function spreadStartMs(cron: Pick<CronSlots, 'fireAfter'>, slot: Date, offsetMs: number): number {
  const at = slot.getTime();
  const gapMs = cron.fireAfter(slot).getTime() - at;
  return at + Math.min(offsetMs, Math.max(gapMs - 1, 0));
}

/** How many of a schedule's coming fires `resolveSpread` checks the window against. */
const FIRES_CHECKED = 100;

/**
 * The `spread` option of `guard.schedule` and `@GuardedCron`: the window in ms, or null without one (absent, 0, or
 * false); a `TypeError` naming the option and the job when it is not a duration, or when it is not
 * shorter than the gap between two fires of the schedule (the shortest of its next 100 gaps): an
 * offset as long as the gap would start a slot's run after the next slot, so the runs of a job
 * would no longer follow its slots. A window that wide asks for what the schedule cannot give, so
 * it is refused rather than cut down to a window the user did not write.
 */
export function resolveSpread(value: unknown, job: string, cron: Pick<CronSlots, 'fireAfter'> | undefined): number | null {
  if (value === undefined || value === false || value === 0) return null;
  let ms = Number.NaN;
  if (typeof value === 'string' || typeof value === 'number' || (typeof value === 'object' && value !== null)) {
    try {
      ms = parseDuration(value as DurationInput, { option: 'spread', job });
    } catch {
      // The message below says what a spread is.
    }
  }
  if (Number.isNaN(ms)) {
    throw new TypeError(
      `Expected \`spread\` of job ${JSON.stringify(job)} to be a duration like '30s' (or 0 for none), got ${describeValue(value)}`,
    );
  }
  if (ms === 0 || cron === undefined) return ms === 0 ? null : ms;
  const gapMs = shortestGapMs(cron);
  if (ms >= gapMs) {
    throw new TypeError(
      `Expected \`spread\` of job ${JSON.stringify(job)} to be shorter than the time between two of its slots ` +
        `(${gapMs} ms), got ${describeValue(value)} (${ms} ms): each run would start after the next slot`,
    );
  }
  return ms;
}

/** Nor further ahead than this: a yearly schedule's hundred fires would be a century's walk. */
const YEAR_MS = 366 * 86_400_000;

/** The shortest gap between two of the schedule's next FIRES_CHECKED fires (within a year), in ms. */
function shortestGapMs(cron: Pick<CronSlots, 'fireAfter'>): number {
  const first = cron.fireAfter(new Date());
  let fire = first;
  let shortest = Number.POSITIVE_INFINITY;
  for (let index = 0; index < FIRES_CHECKED && fire.getTime() - first.getTime() < YEAR_MS; index += 1) {
    const next = cron.fireAfter(fire);
    shortest = Math.min(shortest, next.getTime() - fire.getTime());
    fire = next;
  }
  return shortest;
}
