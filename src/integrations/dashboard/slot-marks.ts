import type { LedgerSlot, SlotOutcome, UnrunOutcome } from '../../core/slot-ledger.js';
import { formatDuration } from '../../core/time-text.js';
import { html, type Html } from './html.js';

/**
 * Each slot outcome's (core/slot-ledger.ts's SLOT_OUTCOMES) shape and word. A missed slot is drawn hollow (a dashed red box around ○),
 * an overlapped one with ⧉: neither relies on its colour.
 */
export const SLOT_MARKS: Readonly<Record<SlotOutcome, { readonly symbol: string; readonly label: string }>> = {
  succeeded: { symbol: '✓', label: 'succeeded' },
  late: { symbol: '◷', label: 'late' },
  failed: { symbol: '✗', label: 'failed' },
  cancelled: { symbol: '⊘', label: 'cancelled' },
  running: { symbol: '▶', label: 'running' },
  overlapped: { symbol: '⧉', label: 'overlapped (the lock was still held)' },
  paused: { symbol: '‖', label: 'paused' },
  missed: { symbol: '○', label: 'missed (no replica ran it)' },
};

/** A run of consecutive slots no run took, all with the same outcome (missed, or overlapped). */
export interface UnrunStretch {
  readonly outcome: UnrunOutcome;
  readonly first: Date;
  readonly last: Date;
  readonly count: number;
}

/**
 * The slots no run took, as stretches of consecutive slots with one outcome, oldest first: a job
 * that stopped running for an hour is one stretch, not 3,600 lines and marks. There are at most
 * one more stretches than slots that some run took, whatever the number of slots.
 */
export function unrunStretches(slots: readonly LedgerSlot[]): UnrunStretch[] {
  // The open stretch grows in place: a copy per slot was 10,000 objects for a week of a stopped
  // every-second job, drawn twice per page (the bench's ten pages spent their longest stretches here).
  const stretches: { outcome: UnrunOutcome; first: Date; last: Date; count: number }[] = [];
  let previous: SlotOutcome | undefined;
  for (const entry of slots) {
    const { outcome } = entry;
    if (outcome === 'missed' || outcome === 'overlapped') {
      const open = stretches.at(-1);
      if (open !== undefined && previous === outcome) {
        open.last = entry.slot;
        open.count += 1;
      } else {
        stretches.push({ outcome, first: entry.slot, last: entry.slot, count: 1 });
      }
    }
    previous = outcome;
  }
  return stretches;
}

/** The outcomes an operator must not overlook: their count is written out beside the strip. */
const ALARMING: readonly SlotOutcome[] = ['missed', 'overlapped', 'failed', 'late'];

/** A slot's outcome as a badge with its shape and its word. */
export function slotBadge(entry: LedgerSlot): Html {
  const outcome = SLOT_MARKS[entry.outcome];
  const delay = entry.delayMs === null ? '' : `, started ${formatDuration(entry.delayMs)} after its slot`;
  return html`<span class="badge slot-${entry.outcome}">${outcome.symbol} ${outcome.label}</span
    >${delay}${entry.catchUp ? ' (a catch-up run)' : ''}`;
}

/** How many slots had each outcome, in words: "47 succeeded, 3 missed". */
export function slotCounts(slots: readonly LedgerSlot[]): string {
  const counts = new Map<SlotOutcome, number>();
  for (const entry of slots) counts.set(entry.outcome, (counts.get(entry.outcome) ?? 0) + 1);
  return [...counts].map(([outcome, count]) => `${count} ${outcome}`).join(', ');
}

/** A job's newest slots as a strip of marks, oldest first, each with its shape and a title; the alarming counts in words. */
export function slotStrip(slots: readonly LedgerSlot[]): Html {
  const marks = slots.map((entry) => {
    const outcome = SLOT_MARKS[entry.outcome];
    const delay = entry.delayMs === null ? '' : `, started ${formatDuration(entry.delayMs)} after it`;
    const title = `slot ${entry.slot.toISOString()}: ${outcome.label}${delay}${entry.catchUp ? ', catch-up' : ''}`;
    return html`<span class="slot-${entry.outcome}" title="${title}">${outcome.symbol}</span>`;
  });
  const alarms = ALARMING.flatMap((outcome) => {
    const count = slots.filter((entry) => entry.outcome === outcome).length;
    return count === 0 ? [] : [html`<strong class="slot-alarm">⚠ ${count} ${outcome}</strong>`];
  });
  return html`<div class="strip" role="img" aria-label="${`last ${slots.length} slots, oldest first: ${slotCounts(slots) || 'none'}`}">
      ${marks}
    </div>
    ${alarms.length === 0 ? '' : html`<p class="slot-alarms">${alarms}</p>`}`;
}

/** The style of the slot marks (appended to the page's). */
export const SLOT_STYLE = `
.slot-succeeded{background:var(--ok)}.slot-late{background:var(--warn)}.slot-failed{background:var(--bad)}.slot-cancelled{background:var(--muted)}
.slot-running{background:var(--run)}.slot-overlapped{background:#8250df}.slot-paused{background:#6e7781}
.strip span.slot-missed,.badge.slot-missed{background:#fff;color:var(--bad);outline:2px dashed var(--bad);outline-offset:-2px;font-weight:bold}
.slot-alarms{margin:.2rem 0}.slot-alarm{color:var(--bad);margin-right:.6rem}
.timeline .slot-mark:focus{outline:3px solid #fb8f44}
`;
