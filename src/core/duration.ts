import { Duration } from 'luxon';
import { describeValue } from './errors.js';

/**
 * A luxon `Duration`, by the members the guard reads, so that the published types need neither
 * luxon's own types nor `@types/luxon`: a luxon `Duration` fits it.
 */
export interface LuxonDurationLike {
  readonly isValid: boolean;
  toMillis(): number;
}

/**
 * A length of time: milliseconds as a number, a short string (`'500ms'`, `'30s'`, `'5m'`, `'2h'`,
 * `'1d'`), an ISO 8601 duration (`'PT30S'`), or a luxon `Duration`.
 */
export type DurationInput = number | string | LuxonDurationLike;

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const SHORT_FORM = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
/**
 * luxon reads 'P' and 'PT' as zero, and accepts negative parts ('P1Y-1D'): a duration must state
 * at least one number, and no minus sign.
 */
const ISO_WITH_A_NUMBER = /^P[^-]*\d[^-]*$/;
/**
 * The longest duration accepted: ten years. Longer ones overflow the databases' date ranges
 * (SQLite and MySQL stop at year 9999), and "forever" is what lockAtMostFor must never mean.
 */
export const MAX_DURATION_MS = 3_650 * 86_400_000;

/** Where a duration came from, for the error message. */
export interface DurationSource {
  option: string;
  job: string | undefined;
}

/**
 * Whole milliseconds for a duration option, or a `TypeError` naming the option, the job and the value.
 * Calendar units in ISO strings (`P1M`) use luxon's casual conversion (a month is 30 days).
 * A fraction of a millisecond (`1.5`, `'0.5ms'`, `'PT0.0001S'`) is rounded up to the next whole
 * one: the dialects store milliseconds (PostgreSQL's intervals would keep the fraction, MySQL's
 * DATETIME(3) would round it, SQLite's integers would cut it), so every dialect gets the same value,
 * and rounding up never shortens a lock.
 */
export function parseDuration(value: unknown, source: DurationSource): number {
  const ms = toMilliseconds(value);
  if (ms === undefined || !Number.isFinite(ms) || ms < 0 || ms > MAX_DURATION_MS) {
    const of = source.job === undefined ? '' : ` of job ${JSON.stringify(source.job)}`;
    throw new TypeError(
      `Expected \`${source.option}\`${of} to be a duration like '5m' or 'PT5M', got ${describeValue(value)}` +
        (ms !== undefined && Number.isFinite(ms) && ms > MAX_DURATION_MS ? ' (longer than the maximum, ten years)' : ''),
    );
  }
  return wholeMilliseconds(ms);
}

/**
 * Rounded up to a whole millisecond, past the binary noise of a decimal fraction first ('1.1s'
 * is 1100.0000000000002 ms in floating point: 1100, not 1101).
 */
function wholeMilliseconds(ms: number): number {
  return Math.ceil(Math.round(ms * 1_000) / 1_000);
}

function toMilliseconds(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') {
    const short = SHORT_FORM.exec(value);
    if (short) return Number(short[1]) * UNIT_MS[short[2] as keyof typeof UNIT_MS];
    if (ISO_WITH_A_NUMBER.test(value)) {
      const iso = Duration.fromISO(value);
      return iso.isValid ? iso.toMillis() : undefined;
    }
    return undefined;
  }
  if (Duration.isDuration(value)) return value.isValid ? value.toMillis() : undefined;
  return undefined;
}

/**
 * Durations and times written for people, the same in the `cronguard` CLI and the dashboard:
 * 850 ms, 1.52 s, 12.3 s, 4 min 5 s, 2 h 10 min; 2026-11-29 07:16:47 UTC.
 */

/** What a duration or a time that is not there reads as, unless the caller says otherwise. */
const NONE = '—';

/** A duration in words a person reads at a glance: 850 ms, 12.3 s, 4 min 5 s, 2 h 10 min. */
export function formatDuration(ms: number | null, none = NONE): string {
  if (ms === null) return none;
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1_000).toFixed(ms < 10_000 ? 2 : 1))} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** A time in UTC, ISO-like, to the second: 2026-11-29 07:16:47 UTC. */
export function formatTime(date: Date | null | undefined, none = NONE): string {
  if (date === null || date === undefined) return none;
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How long ago, from `now`: "5 s ago", "3 min ago", "in 10 s". */
export function formatAgo(date: Date | null | undefined, now: Date): string {
  if (date === null || date === undefined) return NONE;
  const ms = now.getTime() - date.getTime();
  return ms >= 0 ? `${formatDuration(ms)} ago` : `in ${formatDuration(-ms)}`;
}
