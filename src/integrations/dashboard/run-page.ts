import type { RunDetail } from '../../admin/dashboard-reads.js';
import type { LockRecord } from '../../admin/locks.js';
import type { LedgerSlot } from '../../core/slot-ledger.js';
import { formatDuration, formatTime } from './format.js';
import { html, segment, type Html } from './html.js';
import { outcomeBadge } from './job-summary.js';
import { page, type PageContext } from './layout.js';
import { slotBadge } from './slot-marks.js';

/** The run's slot: when, what the ledger made of it, and the gap before it or the catch-up it was. */
function slotFields(run: RunDetail, entry: LedgerSlot | undefined, field: (label: string, value: Html | string) => Html): Html[] {
  if (run.slot === null) return [field('Slot', 'none (a run not tied to a schedule slot)')];
  const fields = [field('Slot', formatTime(run.slot))];
  if (entry !== undefined) fields.push(field('Slot outcome', slotBadge(entry)));
  if (run.catchUp) fields.push(field('Catch-up', 'yes: this run made up for a slot no replica ran (the catchUp option)'));
  if (run.missedSlots !== null && run.missedSlots > 0) {
    fields.push(
      field('Missed before it', html`<strong class="slot-alarm">⚠ ${run.missedSlots} slot(s) before this one ran nowhere</strong>`),
    );
  }
  return fields;
}

/** One run's row in full, its error text included, its slot in the ledger, and its job's lock as it is now. */
export function runPage(context: PageContext, run: RunDetail, lock: LockRecord | undefined, slot: LedgerSlot | undefined): Html {
  const field = (label: string, value: Html | string): Html =>
    html`<dt>${label}</dt>
      <dd>${value}</dd>`;
  return page(
    context,
    `Run of ${run.job}`,
    html`<h1>Run of <a class="name" href="${context.base}/job?name=${segment(run.job)}">${run.job}</a></h1>
      <div id="live">
        <dl>
          ${field('Outcome', outcomeBadge(run.status, run.overran))} ${field('Id (token)', html`<span class="name">${run.id}</span>`)}
          ${field('Replica', html`<span class="name">${run.lockedBy}</span>`)} ${slotFields(run, slot, field)}
          ${field('Started', formatTime(run.startedAt))} ${field('Finished', formatTime(run.finishedAt))}
          ${field('Duration', formatDuration(run.durationMs))} ${field('lockAtMostFor', formatDuration(run.lockAtMostForMs))}
          ${field('Lock until', formatTime(run.lockUntil))}
          ${field('Overran', run.overran ? html`<span class="overran">⚠ yes: it finished after its lock expired; another run may have overlapped it</span>` : 'no')}
          ${field('Job lock now', lock === undefined ? 'no lock row' : `${lock.state}, until ${formatTime(lock.lockUntil)}, taken by ${lock.lockedBy}`)}
        </dl>
        <h2>Error</h2>
        ${run.error === null ? html`<p>None.</p>` : html`<pre>${run.error}</pre>`}
      </div>`,
  );
}
