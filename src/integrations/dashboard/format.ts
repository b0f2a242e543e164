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
