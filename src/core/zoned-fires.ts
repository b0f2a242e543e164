import { IANAZone } from 'luxon';
import { createTask } from 'node-cron';
import { processTimeZone } from './process-time-zone.js';

/**
 * The real instants a cron expression fires at in an IANA time zone, DST nights included, by the
 * rule of Vixie cron (what users of cron expect):
 *
 * - Fall-back (a local hour repeats): an expression with a wildcard or a step (`*`, `/`) in its
 *   second, minute or hour field fires in both occurrences of the repeated hour, every real
 *   minute once; a fixed-time expression (`30 2 * * *`) fires once, at the first occurrence.
 * - Spring-forward (a local hour does not exist): a fixed-time expression whose time falls in the
 *   gap fires once, at the jump (02:30 → 03:00 in Europe/Berlin); a wildcard expression fires on
 *   the local times that exist (its real minutes go on as ever).
 *
 * The fields are matched on the local wall clock by node-cron's own parser, read in UTC (a clock
 * without DST, so its answers are exact); the wall clock is mapped to real instants with luxon's
 * zone offsets. node-cron 4.6 maps the wall clock itself, and wrongly on both nights: it skips
 * the first occurrence of a repeated hour, and a time in a gap never fires.
 */
export interface ZonedFires {
  /** The first fire strictly after the whole second `at` falls in. */
  fireAfter(at: Date): Date;
}

const SECOND = 1_000;
const MINUTE = 60_000;
/** Offsets are checked this far apart when looking for a transition: no zone changes its offset twice within it. */
const TRANSITION_STEP_MS = 6 * 3_600_000;
/** Longer than any DST shift: a fall-back's earlier offset is read this long before the instant. */
const BEFORE_ANY_SHIFT_MS = 6 * 3_600_000;
/** Wall-clock walks per call, at most (a transition or a skipped repeat each take one). */
const MAX_STEPS = 10_000;

/** The wall-clock matcher: node-cron's `TimeMatcher` read in UTC. */
interface WallClockMatcher {
  getNextMatch(date: Date): Date;
}

/** Whether the expression fires on every real minute (Vixie's wildcard jobs): a `*` or `/` in its second, minute or hour field. */
export function isWildcardExpression(expression: string): boolean {
  const fields = (NICKNAMES[expression.trim().toLowerCase()] ?? expression).trim().split(/\s+/);
  const timeFields = fields.length >= 6 ? fields.slice(0, 3) : fields.slice(0, 2);
  return timeFields.some((field) => field.includes('*') || field.includes('/'));
}

/** node-cron's nicknames (4.6), as it expands them. */
const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/**
 * The fires of `expression` (valid for node-cron) in `timezone` (an IANA name; undefined: the
 * process's own zone).
 */
export function zonedFires(expression: string, timezone: string | undefined): ZonedFires {
  const zone = IANAZone.create(timezone ?? processTimeZone());
  /** The zone's offset at instant `ms`, in ms. */
  const offset = (ms: number): number => zone.offset(ms) * MINUTE;
  const wallClock = wallClockMatcher(expression);
  /** The first wall-clock time matching the expression strictly after the whole second of `wall` (both as UTC ms). */
  const nextWall = (wall: number): number => wallClock.getNextMatch(new Date(wall)).getTime();
  const wildcard = isWildcardExpression(expression);

  /** The first instant in (from, to] whose offset is not `current` (to the second), or undefined; offset(from) is `current`. */
  const firstChange = (from: number, to: number, current: number): number | undefined => {
    let lo = from;
    for (;;) {
      const hi = Math.min(lo + TRANSITION_STEP_MS, to);
      if (offset(hi) !== current) {
        // offset(lo) === current: halve (lo, hi] down to the second.
        let low = lo;
        let high = hi;
        while (high - low > SECOND) {
          const mid = low + Math.floor((high - low) / (2 * SECOND)) * SECOND;
          if (offset(mid) === current) low = mid;
          else high = mid;
        }
        return high;
      }
      if (hi >= to) return undefined;
      lo = hi;
    }
  };

  /** Whether wall-clock time `wall` at offset `current` is the second occurrence of a repeated local time. */
  const repeatsEarlier = (wall: number, current: number): boolean => {
    const earlier = offset(wall - current - BEFORE_ANY_SHIFT_MS);
    return earlier > current && offset(wall - earlier) === earlier;
  };

  return {
    fireAfter(at) {
      // `after`: the exclusive lower bound (an instant, a whole second); the fire is the first
      // instant past it whose wall clock matches, walking one offset at a time. `current` is the
      // offset from `from` (≤ after + 1 s) on: at a transition `after` is the second before it
      // (its old offset) and `from` the transition (its new one).
      let after = Math.floor(at.getTime() / SECOND) * SECOND;
      let from = after;
      let current = offset(from);
      for (let step = 0; step < MAX_STEPS; step += 1) {
        const wall = nextWall(after + current);
        const candidate = wall - current;
        const change = firstChange(from, candidate, current);
        if (change === undefined) {
          // Fall-back: a fixed time fires at its first occurrence only.
          if (!wildcard && repeatsEarlier(wall, current)) {
            after = candidate;
            from = candidate;
            continue;
          }
          return new Date(candidate);
        }
        // Spring-forward: a fixed time in the gap (before the wall clock after the jump) fires at the jump.
        const next = offset(change);
        if (!wildcard && next > current && wall < change + next) return new Date(change);
        // Go on past the transition, at the offset after it.
        after = change - SECOND;
        from = change;
        current = next;
      }
      throw new RangeError(`no fire of ${JSON.stringify(expression)} found`);
    },
  };
}

/**
 * node-cron's matcher for the expression read in UTC: the wall clock without DST. node-cron 4.6
 * (pinned) keeps it on the task as `timeMatcher`; the task is never started, and destroyed at
 * once (which takes it out of node-cron's registry).
 */
function wallClockMatcher(expression: string): WallClockMatcher {
  const task = createTask(expression, () => undefined, { timezone: 'UTC' });
  const matcher = (task as unknown as { timeMatcher?: Partial<WallClockMatcher> }).timeMatcher;
  void task.destroy();
  if (typeof matcher?.getNextMatch !== 'function') {
    throw new Error('node-cron no longer exposes its time matcher: cronguard needs the node-cron version it pins');
  }
  return matcher as WallClockMatcher;
}
