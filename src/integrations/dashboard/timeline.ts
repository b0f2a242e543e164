import type { RunRecord } from '../../admin/run-record.js';
import type { LedgerSlot } from '../../core/slot-ledger.js';
import { unrunStretches, OUTCOMES, html, segment, type Html } from './html.js';
import { formatDuration } from '../../core/duration.js';

const WIDTH = 1_000;
const LANE = 26;
const AXIS = 22;
/** The lane above the runs where slots without a run are marked. */
const SLOT_LANE = 24;
/**
 * The most stretches of unrun slots one timeline draws and one job page lists (the newest): each
 * stretch of consecutive missed (or overlapped) slots is one mark and one line, so the page stays
 * bounded however many slots a stopped job missed.
 */
export const MAX_SLOT_MARKS = 100;
const COLOURS: Readonly<Record<RunRecord['status'], string>> = {
  succeeded: '#1a7f37',
  failed: '#cf222e',
  cancelled: '#57606a',
  abandoned: '#9a6700',
  running: '#0969da',
  skipped: '#8c959f',
};

interface Bar {
  readonly run: RunRecord;
  readonly start: number;
  readonly end: number;
  lane: number;
  overlaps: boolean;
}

/** When a run ended, or for one still open, now (running) or its lock's end (abandoned, unfinished). */
function endOf(run: RunRecord, now: Date): number {
  if (run.finishedAt !== null) return run.finishedAt.getTime();
  if (run.status === 'running') return now.getTime();
  return run.lockUntil?.getTime() ?? run.startedAt.getTime();
}

/**
 * Runs as bars on a time axis from `from` to `to`, one lane per run that overlaps another: an
 * overlap is then two bars on top of each other, outlined and labelled. An overran run (it finished
 * after its lock expired) is outlined in red with a ⚠ and its lock's end drawn across it. Each bar
 * is a link to the run (keyboard-focusable), titled with its outcome, times and replica.
 */
export function timeline(
  runs: readonly RunRecord[],
  from: Date,
  to: Date,
  now: Date,
  base: string,
  slots: readonly LedgerSlot[] = [],
): Html {
  const span = Math.max(1, to.getTime() - from.getTime());
  const x = (time: number): number => Math.min(WIDTH, Math.max(0, ((time - from.getTime()) / span) * WIDTH));
  const bars: Bar[] = runs
    .filter((run) => run.status !== 'skipped')
    .map((run) => ({ run, start: run.startedAt.getTime(), end: endOf(run, now), lane: 0, overlaps: false }))
    .sort((a, b) => a.start - b.start);
  const laneEnds: number[] = [];
  for (const bar of bars) {
    let lane = laneEnds.findIndex((end) => end <= bar.start);
    if (lane === -1) lane = laneEnds.length;
    laneEnds[lane] = bar.end;
    bar.lane = lane;
  }
  // Overlapping pairs, in start order: a bar can only overlap the bars that start before it ends,
  // so each looks ahead just that far (linear for runs one after another; a 7 d axis has 1,000).
  bars.forEach((bar, index) => {
    for (let next = index + 1; next < bars.length && (bars[next] as Bar).start < bar.end; next += 1) {
      const other = bars[next] as Bar;
      if (bar.start < other.end) bar.overlaps = other.overlaps = true;
    }
  });
  // Slots no run took: missed (a hollow red triangle and a dashed line down the lanes) or
  // overlapped (a purple diamond), in a lane of their own above the runs, each with its word; a
  // stretch of consecutive ones is one mark spanning them (a band from the first to the last).
  const unrun = unrunStretches(slots.filter((entry) => entry.slot >= from && entry.slot <= to)).slice(-MAX_SLOT_MARKS);
  const top = AXIS + (unrun.length === 0 ? 0 : SLOT_LANE);
  const height = top + Math.max(1, laneEnds.length) * LANE + 4;
  const ticks = Array.from({ length: 7 }, (_, index) => {
    const time = from.getTime() + (span * index) / 6;
    const iso = new Date(time).toISOString();
    const label =
      span > 2 * 86_400_000
        ? iso.slice(5, 16).replace('T', ' ')
        : span > 600_000
          ? iso.slice(11, 16)
          : span > 10_000
            ? iso.slice(11, 19)
            : iso.slice(11, 23);
    const position = (index / 6) * WIDTH;
    const anchor = index === 0 ? 'start' : index === 6 ? 'end' : 'middle';
    return html`<line x1="${position}" x2="${position}" y1="${AXIS - 4}" y2="${height}" stroke="#d0d7de" /><text
        x="${position}"
        y="14"
        font-size="12"
        text-anchor="${anchor}"
        fill="#57606a"
        >${label}</text
      >`;
  });
  const drawn = bars.map((bar) => {
    const { run } = bar;
    const left = Math.min(x(bar.start), WIDTH - 3);
    const width = Math.max(3, x(bar.end) - left);
    const top = AXIS + (unrun.length === 0 ? 0 : SLOT_LANE) + bar.lane * LANE;
    const outcome = OUTCOMES[run.status];
    const notes = [run.overran ? 'overran its lock' : '', bar.overlaps ? 'overlapped another run' : ''].filter(Boolean).join(', ');
    const label = `${outcome.label}${notes === '' ? '' : ` (${notes})`}: started ${run.startedAt.toISOString()}, ${formatDuration(run.durationMs)}, on replica ${run.lockedBy}`;
    const lockEnd = run.overran && run.lockUntil !== null ? x(run.lockUntil.getTime()) : undefined;
    return html`<a href="${base}/run?id=${segment(run.id)}" aria-label="${label}"
      ><title>${label}</title>
      <rect
        x="${left}"
        y="${top}"
        width="${width}"
        height="${LANE - 6}"
        fill="${COLOURS[run.status]}"
        ${run.overran || bar.overlaps ? html` stroke="#cf222e" stroke-width="3" stroke-dasharray="${bar.overlaps ? '6 3' : 'none'}"` : ''}
      />
      ${lockEnd === undefined ? '' : html`<line x1="${lockEnd}" x2="${lockEnd}" y1="${top - 2}" y2="${top + LANE - 4}" stroke="#000" stroke-width="2" />`}
      ${notes === '' ? '' : html`<text x="${left + width + 75 > WIDTH ? left - 3 : left + width + 3}" y="${top + 15}" font-size="12" fill="#cf222e" text-anchor="${left + width + 75 > WIDTH ? 'end' : 'start'}">⚠ ${run.overran ? 'overran' : 'overlap'}</text>`}</a
    >`;
  });
  const labelled = unrun.length <= 12;
  const marks = unrun.map((stretch) => {
    const at = x(stretch.first.getTime());
    const end = Math.max(at, x(stretch.last.getTime()));
    const missed = stretch.outcome === 'missed';
    const word = stretch.outcome;
    const why = missed ? 'no replica ran it' : 'the lock was still held, no run';
    const label =
      stretch.count === 1
        ? `${word} slot ${stretch.first.toISOString()}: ${why}`
        : `${stretch.count} ${word} slots in a row, ${stretch.first.toISOString()} to ${stretch.last.toISOString()}: ${missed ? 'no replica ran them' : 'the lock was still held, no run'}`;
    const y = AXIS + 4;
    const colour = missed ? '#cf222e' : '#8250df';
    const band =
      stretch.count === 1
        ? ''
        : html`<rect
            x="${at}"
            y="${y + 3}"
            width="${Math.max(1, end - at)}"
            height="6"
            fill="${missed ? '#fff' : colour}"
            stroke="${colour}"
          />`;
    const shape = missed
      ? html`${band}<polygon points="${at - 6},${y} ${at + 6},${y} ${at},${y + 12}" fill="#fff" stroke="#cf222e" stroke-width="2" /><line
            x1="${at}"
            x2="${at}"
            y1="${y + 12}"
            y2="${height}"
            stroke="#cf222e"
            stroke-dasharray="3 3"
          />`
      : html`${band}<polygon points="${at},${y} ${at + 6},${y + 6} ${at},${y + 12} ${at - 6},${y + 6}" fill="#8250df" stroke="#fff" />`;
    const text = labelled
      ? html`<text x="${end + 8}" y="${y + 11}" font-size="11" fill="${colour}"
          >${stretch.count === 1 ? word : `${stretch.count} ${word}`}</text
        >`
      : '';
    return html`<g class="slot-mark slot-${stretch.outcome}" tabindex="0" role="img" aria-label="${label}"
      ><title>${label}</title>${shape}${text}</g
    >`;
  });
  return html`<svg class="timeline" viewBox="0 0 ${WIDTH} ${height}" role="group" aria-label="Runs on a time axis">
    ${ticks}${marks}${drawn}
  </svg>`;
}
