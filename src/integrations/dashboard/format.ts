import type { RunRecord, RunStatus } from '../../admin/run-record.js';

/** Each outcome's text and shape: colour is never the only signal. */
export const OUTCOMES: Readonly<Record<RunStatus, { readonly symbol: string; readonly label: string }>> = {
  succeeded: { symbol: '✓', label: 'succeeded' },
  failed: { symbol: '✗', label: 'failed' },
  cancelled: { symbol: '⊘', label: 'cancelled' },
  abandoned: { symbol: '!', label: 'abandoned' },
  running: { symbol: '▶', label: 'running' },
  skipped: { symbol: '–', label: 'skipped' },
};

/** A duration in words a person reads at a glance: 850 ms, 12.3 s, 4 min 5 s, 2 h 10 min. */
export function formatDuration(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1_000).toFixed(ms < 10_000 ? 2 : 1))} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** A time in UTC, ISO-like, to the second. */
export function formatTime(date: Date | null | undefined): string {
  if (date === null || date === undefined) return '—';
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** How long ago, from `now`: "5 s ago", "3 min ago", "in 10 s". */
export function formatAgo(date: Date | null | undefined, now: Date): string {
  if (date === null || date === undefined) return '—';
  const ms = now.getTime() - date.getTime();
  return ms >= 0 ? `${formatDuration(ms)} ago` : `in ${formatDuration(-ms)}`;
}

/**
 * The next slot the history suggests: the newest slot plus the gap between the two newest distinct
 * slots, stepped past `now`. A guess (the runs table does not keep the cron expression); undefined
 * when fewer than two runs had a slot.
 */
export function nextExpectedSlot(runs: readonly RunRecord[], now: Date): Date | undefined {
  const slots = [...new Set(runs.flatMap((run) => (run.slot === null ? [] : [run.slot.getTime()])))].sort((a, b) => b - a);
  const [newest, previous] = slots;
  if (newest === undefined || previous === undefined) return undefined;
  const gap = newest - previous;
  const steps = Math.max(1, Math.ceil((now.getTime() - newest) / gap));
  return new Date(newest + steps * gap);
}
