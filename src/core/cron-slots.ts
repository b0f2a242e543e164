import { IANAZone } from 'luxon';
import { assertCronExpression } from './cron-fields.js';
import { describeValue } from './describe-value.js';
import { zonedFires } from './zoned-fires.js';

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
