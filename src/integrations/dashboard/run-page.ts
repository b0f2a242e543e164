import type { LockRecord } from '../../admin/locks.js';
import type { RunRecord } from '../../admin/run-record.js';
import { formatDuration, formatTime } from './format.js';
import { html, segment, type Html } from './html.js';
import { outcomeBadge } from './job-summary.js';
import { page, type PageContext } from './layout.js';

/** One run's row in full, its error text included, and its job's lock as it is now. */
export function runPage(context: PageContext, run: RunRecord, lock: LockRecord | undefined): Html {
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
          ${field('Replica', html`<span class="name">${run.lockedBy}</span>`)} ${field('Slot', formatTime(run.slot))}
          ${field('Started', formatTime(run.startedAt))} ${field('Finished', formatTime(run.finishedAt))}
          ${field('Duration', formatDuration(run.durationMs))} ${field('lockAtMostFor', formatDuration(run.lockAtMostForMs))}
          ${field('Lock until', formatTime(run.lockUntil))}
          ${field('Overran', run.overran ? html`<span class="overran">⚠ yes: it finished after its lock expired; another run may have overlapped it</span>` : 'no')}
          ${field('Job lock now', lock === undefined ? 'no lock row' : `${lock.state}, until ${formatTime(lock.lockUntil)}, taken by ${lock.lockedBy}`)}
        </dl>
        ${/* PLACEHOLDER(#16 slot ledger): the slot's ledger entry and the run this one took over from. */ ''}
        <h2>Error</h2>
        ${run.error === null ? html`<p>None.</p>` : html`<pre>${run.error}</pre>`}
      </div>`,
  );
}
