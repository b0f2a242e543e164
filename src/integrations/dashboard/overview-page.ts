import type { RecentSlots } from '../../admin/dashboard-ledger.js';
import type { RecentRuns } from '../../admin/dashboard-reads.js';
import type { LockRecord } from '../../admin/locks.js';
import { formatAgo, formatTime, nextExpectedSlot } from './format.js';
import { html, segment, type Html } from './html.js';
import { diagnose, outcomeBadge, problemList, runStrip, slotProblems, stateDetail } from './job-summary.js';
import { page, type PageContext } from './layout.js';
import { slotStrip } from './slot-marks.js';

/** How many slots (or, for a job without a declared schedule, runs) each job's strip shows. */
export const STRIP_RUNS = 50;

/**
 * Every job (every lock row, every declared schedule, every job with runs): state, last outcome,
 * next slot, strip, problems. A job with a declared schedule has its slots in the strip and its
 * next slot from its cron; one without, its runs and a next slot guessed from their slots.
 */
export function overviewPage(context: PageContext, locks: readonly LockRecord[], recent: RecentRuns, ledger: RecentSlots): Html {
  const now = recent.now ?? ledger.now;
  const lockByName = new Map(locks.map((lock) => [lock.name, lock]));
  const names = [...new Set([...lockByName.keys(), ...recent.runs.keys(), ...ledger.jobs.keys()])].sort();
  const jobs = names.map((name, index) => {
    const runs = recent.runs.get(name) ?? [];
    const slots = ledger.jobs.get(name);
    const last = runs[0];
    const guessed = nextExpectedSlot(runs, now);
    const diagnosis = diagnose(name, runs, now);
    return html`<section class="job" aria-labelledby="job-${index}">
      <h2 id="job-${index}"><a class="name" href="${context.base}/job?name=${segment(name)}">${name}</a></h2>
      <dl>
        <dt>State</dt>
        <dd>${stateDetail(lockByName.get(name))}</dd>
        <dt>Last outcome</dt>
        <dd>
          ${last === undefined ? 'no run recorded' : html`${outcomeBadge(last.status, last.overran)} <time datetime="${(last.finishedAt ?? last.startedAt).toISOString()}">${formatAgo(last.finishedAt ?? last.startedAt, now)}</time>`}
        </dd>
        <dt>Next expected slot</dt>
        <dd>
          ${
            slots !== undefined
              ? slots.next === null
                ? '— (the schedule is retired: no replica declares it)'
                : html`${formatTime(slots.next)}
                    <span class="fix"
                      >(from <code class="name">${slots.expression}</code>${slots.timezone === null ? '' : ` in ${slots.timezone}`})</span
                    >`
              : guessed === undefined
                ? '— (no declared schedule, no two slots in the history)'
                : html`${formatTime(guessed)}
                    <span class="fix">(a guess from the gap between the last two slots: no declared schedule)</span>`
          }
        </dd>
        ${
          slots === undefined
            ? html`<dt>Last ${STRIP_RUNS} runs</dt>
                <dd>${runStrip(runs)}</dd>`
            : html`<dt>Last ${STRIP_RUNS} slots</dt>
                <dd>${slots.slots.length === 0 ? 'no slot settled yet' : slotStrip(slots.slots)}</dd>`
        }
        <dt>Problems</dt>
        <dd>${problemList(diagnosis, slots === undefined ? [] : slotProblems(name, slots.slots))}</dd>
      </dl>
    </section>`;
  });
  return page(
    context,
    'Overview',
    html`<h1>Jobs</h1>
      <div id="live" class="jobs">
        ${jobs.length === 0 ? html`<p>No job has a lock row, a declared schedule or a run yet.</p>` : jobs}
      </div>`,
  );
}
