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
