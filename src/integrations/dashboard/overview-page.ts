import type { RecentRuns } from '../../admin/dashboard-reads.js';
import type { LockRecord } from '../../admin/locks.js';
import { formatAgo, formatTime, nextExpectedSlot } from './format.js';
import { html, segment, type Html } from './html.js';
import { diagnose, jobState, outcomeBadge, problemList, runStrip, stateBadge } from './job-summary.js';
import { page, type PageContext } from './layout.js';

/** How many runs each job's strip shows. */
export const STRIP_RUNS = 50;

/** Every job (every lock row, and every job with runs): state, last outcome, next slot, strip, problems. */
export function overviewPage(context: PageContext, locks: readonly LockRecord[], recent: RecentRuns): Html {
  const now = recent.now ?? new Date();
  const lockByName = new Map(locks.map((lock) => [lock.name, lock]));
  const names = [...new Set([...lockByName.keys(), ...recent.runs.keys()])].sort();
  const jobs = names.map((name, index) => {
    const runs = recent.runs.get(name) ?? [];
    const last = runs[0];
    const next = nextExpectedSlot(runs, now);
    const diagnosis = diagnose(name, runs, now);
    return html`<section class="job" aria-labelledby="job-${index}">
      <h2 id="job-${index}"><a class="name" href="${context.base}/job?name=${segment(name)}">${name}</a></h2>
      <dl>
        <dt>State</dt>
        <dd>${stateBadge(jobState(lockByName.get(name)))}</dd>
        <dt>Last outcome</dt>
        <dd>
          ${last === undefined ? 'no run recorded' : html`${outcomeBadge(last.status, last.overran)} <time datetime="${(last.finishedAt ?? last.startedAt).toISOString()}">${formatAgo(last.finishedAt ?? last.startedAt, now)}</time>`}
        </dd>
        <dt>Next expected slot</dt>
        <dd>
          ${next === undefined ? '— (no two slots in the history)' : html`${formatTime(next)} <span class="fix">(from the gap between the last two slots)</span>`}
        </dd>
        <dt>Last ${STRIP_RUNS} runs</dt>
        <dd>${runStrip(runs)}</dd>
        <dt>Problems</dt>
        <dd>${problemList(diagnosis)}</dd>
      </dl>
      ${/* PLACEHOLDER(#17 operator controls): the paused state and its reason/until go in the State row. */ ''}
      ${/* PLACEHOLDER(#16 slot ledger): the strip shows missed slots as marks of their own. */ ''}
    </section>`;
  });
  return page(
    context,
    'Overview',
    html`<h1>Jobs</h1>
      <div id="live" class="jobs">${jobs.length === 0 ? html`<p>No job has a lock row or a run yet.</p>` : jobs}</div>`,
  );
}
