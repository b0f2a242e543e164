import type { LockRecord } from '../../admin/locks.js';
import type { RunRecord } from '../../admin/run-record.js';
import type { JobLedger } from '../../admin/slots.js';
import type { LedgerSlot } from '../../core/slot-ledger.js';
import type { ControlRecord } from '../../admin/controls.js';
import { auditTable, controlForms } from './control-forms.js';
import { CSRF_FIELD } from './http.js';
import { formatDuration, formatTime } from '../../core/duration.js';
import { html, segment, type Html, page, type PageContext, SLOT_MARKS, slotCounts, unrunStretches } from './html.js';
import { diagnose, jobProblems, outcomeBadge, problemList, stateDetail } from './job-summary.js';
import type { RecentJobSlots } from '../../admin/dashboard-reads.js';
import { MAX_SLOT_MARKS, timeline } from './timeline.js';
import { STRIP_RUNS } from './overview-reads.js';

/** The fixed time axes a job page offers, besides `fit` (the job's last FIT_RUNS runs, however long ago). */
export const RANGES = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 } as const;
export type RangeName = keyof typeof RANGES | 'fit';
export const RANGE_NAMES: readonly RangeName[] = ['fit', '1h', '24h', '7d'];
/** How many runs the `fit` axis shows. */
export const FIT_RUNS = 200;

/**
 * The time axis: the range's length up to now, or for `fit` from a little before the oldest run
 * shown (or its slot) to a little after the newest one ended (now, while one runs), stretched to
 * the newest slot no run took (a job that stopped running shows the slots it missed since).
 */
export function axis(range: RangeName, runs: readonly RunRecord[], now: Date, slots: readonly LedgerSlot[] = []): { from: Date; to: Date } {
  if (range !== 'fit') return { from: new Date(now.getTime() - RANGES[range]), to: now };
  const last = runs.at(-1);
  const oldest = last === undefined ? now.getTime() - 60_000 : Math.min(last.startedAt.getTime(), last.slot?.getTime() ?? Infinity);
  const unrun = slots.filter((entry) => entry.runId === null && entry.slot.getTime() >= oldest);
  const newest = Math.max(
    oldest,
    ...runs.map((run) => (run.status === 'running' ? now : (run.finishedAt ?? run.startedAt)).getTime()),
    ...runs.map((run) => run.slot?.getTime() ?? oldest),
    unrun.at(-1)?.slot.getTime() ?? oldest,
  );
  const pad = Math.max(500, (newest - oldest) * 0.05);
  return { from: new Date(oldest - pad), to: new Date(Math.min(now.getTime(), newest + pad)) };
}

function rangeLabel(range: RangeName): string {
  return range === 'fit' ? `last ${FIT_RUNS} runs` : range;
}

/** How the range reads in a sentence. */
function rangeText(range: RangeName): string {
  return range === 'fit' ? `last ${FIT_RUNS} runs` : `last ${range}`;
}

/** What a job page shows: its runs in the range (newest first) and its lock row. */
export interface JobView {
  readonly name: string;
  readonly range: RangeName;
  readonly runs: readonly RunRecord[];
  readonly lock: LockRecord | undefined;
  readonly now: Date;
  /** The outcome of a control just used, shown once. */
  readonly notice: string | undefined;
  /** The job's slot ledger over the axis shown, when it has a declared schedule. */
  readonly ledger: JobLedger | undefined;
  /** The audit of control changes, when the guard has controls. */
  readonly audit: readonly ControlRecord[] | undefined;
  /**
   * The job's newest runs and slots as the overview reads them (STRIP_RUNS each) and the database's
   * clock: its problems and its "usually" come from these, so the page and the overview agree.
   */
  readonly recent: { readonly runs: readonly RunRecord[]; readonly slots: RecentJobSlots | undefined; readonly now: Date };
}

/** The declared schedule and what its slots in the range became; the slots no run took, listed by stretches of consecutive slots. */
function scheduleSection(ledger: JobLedger | undefined): Html {
  if (ledger === undefined) {
    return html`<p class="fix">
      No declared schedule (the job is not run by guard.schedule, a cron decorator or the coordinator): no slot ledger.
    </p>`;
  }
  const stretches = unrunStretches(ledger.slots);
  const unrun = stretches.reduce((sum, stretch) => sum + stretch.count, 0);
  const items = stretches
    .slice(-MAX_SLOT_MARKS)
    .reverse()
    .map(
      (stretch) =>
        html`<li>
          <strong class="slot-alarm">${SLOT_MARKS[stretch.outcome].symbol} ${stretch.outcome}</strong>
          ${stretch.count === 1 ? formatTime(stretch.first) : `${formatTime(stretch.first)} … ${formatTime(stretch.last)} (${stretch.count} slots in a row)`}
        </li>`,
    );
  return html`<p>
      Schedule
      <code class="name">${ledger.expression}</code
      >${ledger.timezone === null ? '' : html` in ${ledger.timezone}`}${ledger.retired ? ' (retired: no replica declares it any more)' : ''}.
      Slots in this range:
      ${ledger.slots.length === 0 ? 'none yet' : slotCounts(ledger.slots)}${ledger.truncated ? ` (the newest ${ledger.slots.length})` : ''}.
    </p>
    ${
      unrun === 0
        ? ''
        : html`<details open>
            <summary>
              ${unrun} slot(s) no run took, in ${stretches.length} stretch(es) of consecutive slots, newest
              first${stretches.length > MAX_SLOT_MARKS ? ` (the newest ${MAX_SLOT_MARKS} stretches)` : ''}
            </summary>
            <ul class="slot-list">
              ${items}
            </ul>
          </details>`
    }`;
}

/** A job: its timeline, its durations against lockAtMostFor, its problems, its runs, and its controls. */
export function jobPage(context: PageContext, view: JobView): Html {
  const { name, range, runs, lock, now, ledger, recent } = view;
  const { from, to } = axis(range, runs, now, ledger?.slots);
  const diagnosis = diagnose(name, runs, now);
  const jobPath = `${context.base}/job?name=${segment(name)}`;
  const ranges = RANGE_NAMES.map(
    (key) =>
      html` <a href="${jobPath}&amp;range=${key}"${key === range ? html` aria-current="page"><strong>${rangeLabel(key)}</strong>` : html`>${rangeLabel(key)}`}</a>`,
  );
  const limit = diagnosis.lockAtMostForMs;
  const stat = (label: string, ms: number | null): Html =>
    html`<tr>
      <th scope="row">${label}</th>
      <td>${formatDuration(ms)}</td>
      <td>${ms === null || limit === null ? '—' : `${Math.round((ms / limit) * 100)} %${ms > limit ? ' ⚠ over' : ''}`}</td>
    </tr>`;
  const rows = runs.slice(0, 200).map(
    (run) =>
      html`<tr>
        <td><a href="${context.base}/run?id=${segment(run.id)}">${formatTime(run.startedAt)}</a></td>
        <td>${outcomeBadge(run.status, run.overran)}</td>
        <td>${formatDuration(run.durationMs)}</td>
        <td class="name">${run.lockedBy}</td>
        <td class="wide">${formatTime(run.slot)}</td>
      </tr>`,
  );
  const live = html`<div id="live">
    <p>
      State:
      ${stateDetail(lock, recent)}${lock === undefined ? '' : html` · lock ${lock.state} until ${formatTime(lock.lockUntil)}, taken by <span class="name">${lock.lockedBy}</span>`}
    </p>
    <h2>Timeline</h2>
    <p class="fix">
      Each bar is a run (focus or hover it for its replica); ⚠ marks a run that overran its lock or overlapped another; a hollow ▽ above the
      runs marks a missed slot, a ◆ an overlapped one.
    </p>
    ${
      runs.length === 0 && (ledger?.slots.length ?? 0) === 0
        ? html`<p>No run in the ${rangeText(range)}.</p>`
        : timeline(runs, from, to, now, context.base, ledger?.slots)
    }
    ${scheduleSection(ledger)}
    <h2>Durations</h2>
    <div class="scroll">
      <table>
        <caption>
          Durations in the ${rangeText(range)} against lockAtMostFor (${formatDuration(limit)})
        </caption>
        <tr>
          <th scope="col">measure</th>
          <th scope="col">duration</th>
          <th scope="col">of lockAtMostFor</th>
        </tr>
        ${stat('p50', diagnosis.p50Ms)}${stat('p95', diagnosis.p95Ms)}${stat('max', diagnosis.maxMs)}
      </table>
    </div>
    <h2>Problems</h2>
    <p class="fix">
      From its newest ${recent.slots === undefined ? '' : `${STRIP_RUNS} slots and `}${STRIP_RUNS} runs, as on the overview.
    </p>
    ${problemList(jobProblems(name, recent.runs, recent.slots?.slots, recent.now))}
    <h2>Runs</h2>
    <div class="scroll">
      <table>
        <caption>
          The ${rangeText(range)}, newest first${runs.length > 200 ? ' (first 200)' : ''}
        </caption>
        <tr>
          <th scope="col">started</th>
          <th scope="col">outcome</th>
          <th scope="col">duration</th>
          <th scope="col">replica</th>
          <th scope="col" class="wide">slot</th>
        </tr>
        ${rows}
      </table>
    </div>
  </div>`;
  return page(
    context,
    name,
    html`<h1 class="name">${name}</h1>
      ${view.notice === undefined ? '' : html`<p role="status"><strong>${view.notice}</strong></p>`}
      <nav aria-label="Time range">Range:${ranges}</nav>
      ${live}${controls(context, name, lock)} ${auditTable(view.audit)}`,
  );
}

/** The job's controls, only for a request that may use them (a CSRF token was issued). */
function controls(context: PageContext, name: string, lock: LockRecord | undefined): Html {
  if (context.csrfToken === undefined) return html``;
  const token = html`<input type="hidden" name="${CSRF_FIELD}" value="${context.csrfToken}" />`;
  // Formatted by hand: one line per control, each label's text whole.
  // prettier-ignore
  return html`<section aria-labelledby="controls">
    <h2 id="controls">Controls</h2>
    ${controlForms(context, name, lock)}
    <form method="post" action="${context.base}/job/unlock">
      ${token}<input type="hidden" name="job" value="${name}" />
      <p><label for="unlock-confirm"><input type="checkbox" id="unlock-confirm" name="confirm" value="yes" required />
        The process holding this lock is gone (if it is alive, its run and the next can overlap)</label></p>
      <button type="submit" ${lock?.state === 'held' ? '' : html` disabled aria-describedby="unlock-why"`}>Unlock</button>
      ${lock?.state === 'held' ? '' : html`<span id="unlock-why">(the lock is free)</span>`}
    </form>
  </section>`;
}
