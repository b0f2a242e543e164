import type { LockRecord } from '../../admin/locks.js';
import { formatDuration, formatTime } from '../../core/duration.js';
import { html, segment, type Html, page, type PageContext } from './html.js';
import { jobState, stateBadge } from './job-summary.js';

/** The lock table as the database has it now. */
export function locksPage(context: PageContext, locks: readonly LockRecord[]): Html {
  const rows = locks.map(
    (lock) =>
      html`<tr>
        <td><a class="name" href="${context.base}/job?name=${segment(lock.name)}">${lock.name}</a></td>
        <td>${stateBadge(jobState(lock))}</td>
        <td class="name">${lock.lockedBy}</td>
        <td>${formatTime(lock.lockedAt)}</td>
        <td>${formatTime(lock.lockUntil)}</td>
        <td>${lock.remainingMs > 0 ? formatDuration(lock.remainingMs) : 'free'}</td>
      </tr>`,
  );
  return page(
    context,
    'Locks',
    html`<h1>Locks</h1>
      <div id="live" class="scroll">
        <table>
          <caption>
            One row per job, on the database's clock
          </caption>
          <tr>
            <th scope="col">job</th>
            <th scope="col">state</th>
            <th scope="col">taken by</th>
            <th scope="col">taken at</th>
            <th scope="col">until</th>
            <th scope="col">time left</th>
          </tr>
          ${
            rows.length === 0
              ? html`<tr>
                  <td colspan="6">No lock row yet.</td>
                </tr>`
              : rows
          }
        </table>
      </div>`,
  );
}
