import type { ControlRecord } from '../../admin/controls.js';
import type { LockRecord } from '../../admin/locks.js';
import { formatTime, type DurationInput } from '../../core/duration.js';
import { storableText, describeValue } from '../../core/errors.js';
import { CSRF_FIELD, SUBMISSION_FIELD } from './http.js';
import { html, type Html, type PageContext } from './html.js';

/** The guard's operator controls, as the dashboard drives them (`guard.pause`, `resume`, `trigger`, `controls`). */
export interface DashboardControls {
  pause(job: string, options: { until?: DurationInput; reason?: string; by: string }): Promise<unknown>;
  resume(job: string, options: { reason?: string; by: string }): Promise<boolean>;
  trigger(job: string, options: { force: boolean; by: string }): Promise<string>;
  /** The job's audit of control changes, newest first. */
  audit(job: string): Promise<ControlRecord[]>;
}

/** What the audit records as the actor of a change made from the dashboard, when its `actor` option names nobody. */
export const DASHBOARD_ACTOR = 'dashboard';
/** The most characters of an actor the audit keeps: the length of `by` everywhere (its columns hold 255). */
export const MAX_ACTOR_LENGTH = 255;

/**
 * The audit's actor from what the `actor` option returned: the default for undefined or blank
 * text; else the text, storable (NUL and lone surrogates replaced) and cut to MAX_ACTOR_LENGTH
 * UTF-16 units without splitting a surrogate pair. Anything else is a `TypeError`.
 */
export function operatorName(value: unknown): string {
  if (value === undefined) return DASHBOARD_ACTOR;
  if (typeof value !== 'string') {
    throw new TypeError(`Expected \`actor\` of the dashboard to return a string or undefined, got ${describeValue(value)}`);
  }
  const name = storableText(value.trim());
  if (name === '') return DASHBOARD_ACTOR;
  if (name.length <= MAX_ACTOR_LENGTH) return name;
  const cut = name.slice(0, MAX_ACTOR_LENGTH);
  // A high surrogate last: its pair was cut off.
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/** The POST paths of the controls besides unlock. */
export const CONTROL_PATHS = ['/job/pause', '/job/resume', '/job/trigger'] as const;
export type ControlPath = (typeof CONTROL_PATHS)[number];

/** The notices a control's redirect may ask for: fixed texts, so nothing in a URL is ever echoed. */
export const CONTROL_NOTICES: Readonly<Record<string, string>> = {
  paused: 'Paused: no replica starts this job until it is resumed or the pause lifts.',
  resumed: 'Resumed: the next slot runs.',
  'not-paused': 'Nothing to resume: the job was not paused.',
  triggered: 'Run requested: a replica that schedules this job runs it at its next poll.',
};

/** Text of a form field, trimmed; undefined when empty. */
function field(form: URLSearchParams, name: string): string | undefined {
  const value = form.get(name)?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/**
 * Applies a control POSTed from a job page (already checked: controls on, authorized, CSRF token,
 * valid job name) as made by `by` (see `operatorName`) and returns the notice to show. A bad value
 * (an `until` that is no duration) is the guard's `TypeError`, which names it.
 */
export async function applyControl(
  controls: DashboardControls,
  path: ControlPath,
  job: string,
  form: URLSearchParams,
  by: string,
): Promise<string> {
  const reason = field(form, 'reason');
  if (path === '/job/pause') {
    const until = field(form, 'until');
    await controls.pause(job, {
      by,
      ...(until === undefined ? {} : { until }),
      ...(reason === undefined ? {} : { reason }),
    });
    return 'paused';
  }
  if (path === '/job/resume') {
    return (await controls.resume(job, { by, ...(reason === undefined ? {} : { reason }) })) ? 'resumed' : 'not-paused';
  }
  await controls.trigger(job, { by, force: form.get('force') === 'yes' });
  return 'triggered';
}

/** Pause (until, reason), resume and trigger forms, each a POST carrying the CSRF token. */
export function controlForms(context: PageContext, name: string, lock: LockRecord | undefined): Html {
  if (context.csrfToken === undefined) return html``;
  const hidden = html`<input type="hidden" name="${CSRF_FIELD}" value="${context.csrfToken}" /><input
      type="hidden"
      name="job"
      value="${name}"
    />${context.submission === undefined ? '' : html`<input type="hidden" name="${SUBMISSION_FIELD}" value="${context.submission}" />`}`;
  const paused = (lock?.paused ?? null) !== null;
  // Formatted by hand: one line per field, each label's text whole.
  // prettier-ignore
  return html`<form method="post" action="${context.base}/job/pause" class="control">
      ${hidden}<h3>Pause</h3>
      <p><label for="pause-until">For (a duration such as 30m or 2h; empty: until resumed)</label>
        <input id="pause-until" name="until" type="text" inputmode="text" maxlength="40" autocomplete="off" /></p>
      <p><label for="pause-reason">Reason</label> <input id="pause-reason" name="reason" type="text" maxlength="1000" /></p>
      <button type="submit">Pause</button>
    </form>
    <form method="post" action="${context.base}/job/resume" class="control">
      ${hidden}<h3>Resume</h3>
      <p><label for="resume-reason">Reason</label> <input id="resume-reason" name="reason" type="text" maxlength="1000" /></p>
      <button type="submit" ${paused ? '' : html` disabled aria-describedby="resume-why"`}>Resume</button>
      ${paused ? '' : html`<span id="resume-why">(the job is not paused)</span>`}
    </form>
    <form method="post" action="${context.base}/job/trigger" class="control">
      ${hidden}<h3>Run now</h3>
      <p><label for="trigger-force"><input type="checkbox" id="trigger-force" name="force" value="yes" /> Even while paused</label></p>
      <button type="submit">Trigger</button>
    </form>`;
}

/** The audit of control changes: who paused, resumed, triggered, when, why. */
export function auditTable(records: readonly ControlRecord[] | undefined): Html {
  if (records === undefined) return html``;
  const rows = records.map(
    (record) =>
      html`<tr>
        <td>${formatTime(record.at)}</td>
        <td>${record.action}</td>
        <td class="name">${record.by}</td>
        <td>${record.reason ?? '—'}</td>
        <td>
          ${record.action === 'pause' || record.action === 'auto-pause' ? (record.until === null ? 'until resumed' : formatTime(record.until)) : ''}
        </td>
      </tr>`,
  );
  return html`<h2 id="audit">Control changes</h2>
    <div class="scroll">
      <table aria-labelledby="audit">
        <tr>
          <th scope="col">when</th>
          <th scope="col">action</th>
          <th scope="col">by</th>
          <th scope="col">reason</th>
          <th scope="col">pause until</th>
        </tr>
        ${
          rows.length === 0
            ? html`<tr>
                <td colspan="5">No control change yet.</td>
              </tr>`
            : rows
        }
      </table>
    </div>`;
}
