import { IANAZone } from 'luxon';
import { assertCronExpression } from './cron-fields.js';
import { describeValue } from './errors.js';
import { createTask } from 'node-cron';
import type { Logger } from './logger.js';

/**
 * A call made this long before a fire time belongs to that fire: a timer that fired a few ms early
 * (timers run on the monotonic clock, the fire time is wall-clock, and a clock being slewed by NTP
 * drifts between the two) still claims the slot it was meant for, not the one before, which has
 * already run. A call must then come less than the gap between two fires minus this after its
 * fire, or it claims the next fire's slot (which still runs once: its own call finds it done).
 */
export const EARLY_CALL_TOLERANCE_MS = 100;

/**
 * The longest cron expression a job may have: the slot ledger's `cron_expression` column
 * (`varchar(255)` on PostgreSQL and MySQL). A longer one made the server refuse the declaring
 * statement, and with it the other jobs declared beside it.
 */
export const MAX_CRON_EXPRESSION_LENGTH = 255;

/** How far back a slot is looked for: past any expression that fires at all (29 February fires every 4 to 8 years). */
const MAX_LOOKBACK_MS = 2 ** 39;

/** A job's `cron` option, resolved: the slot each call claims. */
export interface CronSlots {
  /** The cron expression the caller fires the job on. */
  readonly expression: string;
  /** The IANA time zone the expression is read in; undefined for the process's own. */
  readonly timezone: string | undefined;
  /**
   * The slot a call made at `at` (this replica's clock) claims: the expression's last fire at or
   * before `at` plus 100 ms.
   */
  slotAt(at: Date): Date;
  /** The expression's first fire strictly after the whole second `at` falls in (the slot ledger walks a range with it). */
  fireAfter(at: Date): Date;
}

/**
 * Validates a job's `cron` and `timezone` options: undefined without `cron` (a `timezone` alone is
 * left to `guard.schedule`, which reads it for its own expression), else the job's slots. A
 * `TypeError` naming the option, the job and the value when wrong.
 */
export function resolveCronSlots(cron: unknown, timezone: unknown, job: string): CronSlots | undefined {
  if (cron === undefined) return undefined;
  assertCronExpression(cron, '`cron`', job);
  if (cron.length > MAX_CRON_EXPRESSION_LENGTH) {
    throw new TypeError(
      `Expected \`cron\` of job ${JSON.stringify(job)} to be at most ${MAX_CRON_EXPRESSION_LENGTH} characters long ` +
        `(the slot ledger's column), got ${cron.length}: ${describeValue(cron)}`,
    );
  }
  if (timezone !== undefined && (typeof timezone !== 'string' || !IANAZone.isValidZone(timezone))) {
    throw new TypeError(
      `Expected \`timezone\` of job ${JSON.stringify(job)} to be an IANA time zone like 'Europe/Paris', got ${describeValue(timezone)}`,
    );
  }
  const key = `${timezone ?? ''}\n${cron}`;
  let slots = known.get(key);
  if (slots === undefined) {
    slots = cronSlots(cron, timezone);
    try {
      slots.slotAt(new Date());
    } catch {
      throw new TypeError(
        `Expected \`cron\` of job ${JSON.stringify(job)} to fire at least once every 17 years, got ${describeValue(cron)}`,
      );
    }
    if (known.size >= MAX_KNOWN) known.clear();
    known.set(key, slots);
  }
  return slots;
}

/**
 * Slots by time zone and expression: `guard.run` resolves its options at every call, and a slot
 * depends on nothing else, so calls share one matcher and its last answer. Bounded, for apps that
 * build expressions on the fly.
 */
const known = new Map<string, CronSlots>();
const MAX_KNOWN = 1_000;

function cronSlots(expression: string, timezone: string | undefined): CronSlots {
  // The expression's real fire instants, DST nights included (zoned-fires.ts): what the ledger
  // expects and a slot is, and what `guard.schedule` fires on (slot-heartbeat.ts).
  const fires = zonedFires(expression, timezone);
  // A fire takes 50 to 100 µs to compute, and every job on this expression asks the same
  // questions at each fire (the slot it claims, the slot before it, the fire after it: the slot
  // ledger's checks after a win), so the answers are kept in two windows of [a fire, the next fire)
  // and the last fire asked after. Calls of one job come in order, so most are answered from
  // these, or with one step forward.
  const next = (ms: number): number => fires.fireAfter(new Date(ms)).getTime();
  let slot = Number.NaN;
  let following = Number.NaN;
  let earlierSlot = Number.NaN;
  let earlierFollowing = Number.NaN;
  let askedAfter = Number.NaN;
  let fireAfterAsked = Number.NaN;
  /** The last fire at or before `t` (a whole second), when a window knows it. */
  const known = (t: number): number | undefined => {
    if (t >= slot && t < following) return slot;
    if (t >= earlierSlot && t < earlierFollowing) return earlierSlot;
    return undefined;
  };
  const remember = (found: number, after: number): void => {
    if (Number.isNaN(slot) || found > slot) {
      // A newer window: the current one becomes the earlier one (the slot before, asked next).
      earlierSlot = slot;
      earlierFollowing = following;
      slot = found;
      following = after;
    } else {
      earlierSlot = found;
      earlierFollowing = after;
    }
  };
  return {
    expression,
    timezone,
    slotAt(at) {
      const t = Math.floor((at.getTime() + EARLY_CALL_TOLERANCE_MS) / 1000) * 1000;
      const hit = known(t);
      if (hit !== undefined) return new Date(hit);
      if (t >= following) {
        const after = next(following);
        if (after > t) {
          remember(following, after);
          return new Date(slot);
        }
      }
      const found = lastFireAtOrBefore(next, t);
      remember(found, next(found));
      return new Date(found);
    },
    fireAfter(at) {
      const t = Math.floor(at.getTime() / 1000) * 1000;
      if (t >= slot && t < following) return new Date(following);
      if (t >= earlierSlot && t < earlierFollowing) return new Date(earlierFollowing);
      if (t !== askedAfter) {
        askedAfter = t;
        fireAfterAsked = next(t);
      }
      return new Date(fireAfterAsked);
    },
  };
}

/**
 * The last fire at or before `t` (a whole second), from a function that only looks forward: find a
 * window (t − span, t] that holds a fire by doubling the span, then halve it down to one second.
 * Invariant: next(lo) ≤ t < next(hi).
 */
function lastFireAtOrBefore(next: (ms: number) => number, t: number): number {
  let span = 1_000;
  while (next(t - span) > t) {
    span *= 2;
    if (span > MAX_LOOKBACK_MS) throw new RangeError('no fire in the look-back window');
  }
  let lo = t - span;
  let hi = t;
  while (hi - lo > 1_000) {
    const mid = lo + Math.floor((hi - lo) / 2_000) * 1_000;
    if (next(mid) <= t) lo = mid;
    else hi = mid;
  }
  return next(lo);
}

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

let resolved: { zone: string; note: string | null } | undefined;

/**
 * The process's own time zone as an IANA name, resolved once: what `Intl` says when it is one;
 * else, for a path `TZ` (`/usr/share/zoneinfo/Europe/Paris`), the name after `zoneinfo/`; else
 * UTC, with a note of why. An empty `TZ` makes Intl answer `Etc/Unknown`, a path or an unknown
 * name nothing at all: stored as the zone of a schedule, that made every reader of the ledger fail.
 */
function resolveProcessTimeZone(): { zone: string; note: string | null } {
  const intl = Intl.DateTimeFormat().resolvedOptions().timeZone as string | undefined;
  if (intl !== undefined && intl !== 'Etc/Unknown' && IANAZone.isValidZone(intl)) return { zone: intl, note: null };
  const tz = process.env['TZ'] ?? '';
  const fromPath = /zoneinfo\/(.+)$/.exec(tz)?.[1];
  if (fromPath !== undefined && IANAZone.isValidZone(fromPath)) return { zone: fromPath, note: null };
  return {
    zone: 'UTC',
    note: `The process's time zone (TZ=${JSON.stringify(tz)}, read as ${JSON.stringify(intl ?? null)}) is no IANA zone: schedules without \`timezone\` are declared in UTC. Set TZ to an IANA name like 'Europe/Paris', or give each job its \`timezone\``,
  };
}

/** The process's IANA time zone (UTC when it has none), resolved once; the first call with a logger warns once when it fell back to UTC. */
export function processTimeZone(logger?: Logger): string {
  resolved ??= resolveProcessTimeZone();
  if (resolved.note !== null && logger !== undefined) {
    logger.warn(resolved.note);
    resolved = { ...resolved, note: null };
  }
  return resolved.zone;
}
