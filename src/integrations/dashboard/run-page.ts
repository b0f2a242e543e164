import type { RunDetail } from '../../admin/dashboard-reads.js';
import type { LockRecord } from '../../admin/locks.js';
import type { RunRecord } from '../../admin/run-record.js';
import type { LedgerSlot } from '../../core/slot-ledger.js';
import { formatDuration, formatTime } from '../../core/duration.js';
import { html, segment, type Html, page, type PageContext, slotBadge } from './html.js';
import { outcomeBadge } from './job-summary.js';

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

/** A link to another run of the job: its id, replica, start and outcome. */
function runLink(context: PageContext, other: RunRecord): Html {
  return html`<a class="name" href="${context.base}/run?id=${segment(other.id)}">run ${other.id}</a> on
    <span class="name">${other.lockedBy}</span>, started ${formatTime(other.startedAt)}, ${outcomeBadge(other.status, other.overran)}`;
}

/**
 * The takeovers around the run: the run whose lock it took without that run releasing it, and the
 * run that took its own lock so. Nothing when it took a free lock and released it.
 */
function takeoverFields(context: PageContext, run: RunDetail, field: (label: string, value: Html | string) => Html): Html[] {
  const fields: Html[] = [];
  const from = run.tookOverFrom;
  if (from !== null) {
    const why =
      from.finishedAt === null
        ? 'its lock expired while it was running, and it never released it (its process died, froze, or is still running)'
        : `its lock expired while it was running, and it finished only at ${formatTime(from.finishedAt)}, after this run had taken the lock`;
    fields.push(field('Took over from', html`${runLink(context, from)}<br /><span class="fix">${why}</span>`));
  }
  const by = run.takenOverBy;
  if (by !== null) {
    fields.push(
      field(
        'Taken over by',
        html`${runLink(context, by)}<br /><span class="fix"
            >this run's lock expired before it released it, and that run took the lock</span
          >`,
      ),
    );
  }
  return fields;
}

/**
 * One run's row in full, its error text included, its slot in the ledger, the run it took over
 * from (or that took over from it), and its job's lock as it is now.
 */
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
          ${takeoverFields(context, run, field)}
          ${field('Job lock now', lock === undefined ? 'no lock row' : `${lock.state}, until ${formatTime(lock.lockUntil)}, taken by ${lock.lockedBy}`)}
        </dl>
        <h2>Error</h2>
        ${run.error === null ? html`<p>None.</p>` : html`<pre>${run.error}</pre>`}
      </div>`,
  );
}
