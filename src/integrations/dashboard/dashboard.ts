import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RunDetail } from '../../admin/dashboard-reads.js';
import type { HistoryPage, HistoryQuery } from '../../admin/history.js';
import type { LockRecord } from '../../admin/locks.js';
import type { JobLedger, SlotsQuery } from '../../admin/slots.js';
import { GuardError, messageOf } from '../../core/errors.js';
import { validateJobName } from '../../core/job-options.js';
import { consoleLogger, type Logger } from '../../core/logger.js';
import {
  HostCheck,
  CsrfProtection,
  CSRF_FIELD,
  readForm,
  HttpError,
  notMine,
  refuseHost,
  send,
  sendError,
  statusOf,
  newSubmissionKey,
  Submissions,
  SUBMISSION_FIELD,
} from './http.js';
import { applyControl, CONTROL_NOTICES, CONTROL_PATHS, operatorName, type DashboardControls } from './control-forms.js';
import { resolveDashboardOptions, type DashboardHandler, type DashboardOptions } from './dashboard-options.js';
import type { Html, PageContext } from './html.js';
import { axis, FIT_RUNS, jobPage, RANGE_NAMES, RANGES } from './job-page.js';
import { locksPage } from './locks-page.js';
import { overviewPage } from './overview-page.js';
import { overviewQuery, readOverview, STRIP_RUNS, type OverviewSource } from './overview-reads.js';
import { runPage } from './run-page.js';
export type { DashboardHandler, DashboardOptions } from './dashboard-options.js';

/** What the dashboard reads and does: the guard's administration. */
export interface DashboardSource extends OverviewSource {
  /** One job's slot ledger in a range (`guard.slots`). */
  slots(query: SlotsQuery): Promise<JobLedger[]>;
  run(id: string): Promise<RunDetail | undefined>;
  history(query: HistoryQuery | undefined): Promise<HistoryPage>;
  /** Every lock row, or those of the jobs named. */
  locks(names?: readonly string[]): Promise<LockRecord[]>;
  /** `job` is a validated job name. */
  /** Frees a held lock; `by` is the operator the audit records. */
  unlock(job: string, by: string): Promise<boolean>;
  /** Pause, resume, trigger and the audit; without them the page has only unlock. */
  readonly controls?: DashboardControls;
}

/**
 * A read is shared for this long by every page that asks for the same thing: however many pages
 * are open on one dashboard, each kind of read reaches the database at most once a second.
 */
const SHARED_READ_MS = 1_000;
/** The most runs a job page reads (the 7 d axis of a job running every 10 minutes is 1,008). */
const JOB_PAGE_RUNS = 1_000;
/** The notices a control's redirect may ask for: fixed texts, so nothing in a URL is ever echoed. */
const NOTICES: Readonly<Record<string, string>> = {
  unlocked: 'Unlocked: the lock was held and is now free.',
  'not-held': 'Nothing to unlock: the lock was already free.',
  ...CONTROL_NOTICES,
};

/** Builds the dashboard's request handler over a guard's administration. */
export function createDashboard(source: DashboardSource, options?: DashboardOptions, logger: Logger = consoleLogger): DashboardHandler {
  const settings = resolveDashboardOptions(options);
  const hosts = new HostCheck(settings.allowedHosts, settings.trustProxy);
  const csrf = new CsrfProtection(hosts);
  const submissions = new Submissions();
  /** The refused hosts already logged: a rebinding page that keeps refreshing is logged once. */
  const refusedHosts = new Set<string>();
  const reads = new Map<string, { at: number; value: Promise<unknown> }>();

  function shared<T>(key: string, read: () => Promise<T>): Promise<T> {
    const now = performance.now();
    const hit = reads.get(key);
    if (hit !== undefined && now - hit.at < SHARED_READ_MS) return hit.value as Promise<T>;
    for (const [other, entry] of reads) if (now - entry.at >= SHARED_READ_MS) reads.delete(other);
    const value = read();
    reads.set(key, { at: now, value });
    value.catch(() => reads.delete(key));
    return value;
  }

  async function allowed(req: IncomingMessage): Promise<boolean> {
    if (settings.readOnly || settings.authorize === undefined) return false;
    try {
      return (await settings.authorize(req)) === true;
    } catch {
      return false;
    }
  }

  /** Where the dashboard's links start: `basePath`, else Express's mount path (`req.baseUrl`), else the root. */
  function baseOf(req: IncomingMessage): { base: string; stripped: boolean } {
    // Express's app.use(path, handler) strips its mount path from req.url and keeps it in req.baseUrl.
    const mountedAt = (req as IncomingMessage & { baseUrl?: unknown }).baseUrl;
    const stripped = typeof mountedAt === 'string' && mountedAt !== '';
    return { base: settings.basePath ?? (stripped ? mountedAt : ''), stripped };
  }

  async function handle(req: IncomingMessage, res: ServerResponse, next: ((error?: unknown) => void) | undefined): Promise<void> {
    const { base, stripped } = baseOf(req);
    const url = req.url ?? '/';
    const queryAt = url.indexOf('?');
    let path = queryAt === -1 ? url : url.slice(0, queryAt);
    const query = new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1));
    if (!stripped && base !== '') {
      if (path !== base && !path.startsWith(`${base}/`)) return notMine(res, next);
      path = path.slice(base.length);
    }
    if (path === '') path = '/';
    const method = req.method ?? 'GET';
    // Before anything is read or changed: a foreign Host is a page rebound to this address.
    if (!hosts.allows(req)) {
      const host = hosts.requestHost(req) ?? '';
      if (!refusedHosts.has(host) && refusedHosts.size < 100) {
        refusedHosts.add(host);
        logger.warn(
          `Dashboard refused ${method} ${JSON.stringify(path)} for host ${JSON.stringify(host)}: not an allowed host (DNS rebinding?)`,
        );
      }
      return refuseHost(res);
    }
    const nonce = randomBytes(16).toString('base64');
    let context: PageContext = { base, nonce, csrfToken: undefined };
    const headers: Record<string, string> = {};

    if (method === 'POST') {
      if (path !== '/job/unlock' && !CONTROL_PATHS.some((control) => control === path)) return notMine(res, next);
      const location = await control(req, base, path);
      res.writeHead(303, { Location: location, 'Cache-Control': 'no-store' }).end();
      return;
    }
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, 'Only GET, HEAD and POST.');
    if (await allowed(req)) {
      const { id, setCookie } = csrf.identify(req, base === '' ? '/' : base);
      if (setCookie !== undefined) headers['Set-Cookie'] = setCookie;
      context = { ...context, csrfToken: csrf.token(id) };
    }
    let body: Html;
    if (path === '/') {
      // A page of jobs, its reads bounded by the page whatever the number of jobs (overview-reads.ts).
      const overview = overviewQuery(query);
      const key = `overview\0${overview.after ?? ''}\0${overview.contains ?? ''}\0${overview.problems ? 1 : 0}`;
      body = overviewPage(context, await shared(key, () => readOverview(source, overview)));
    } else if (path === '/locks') {
      body = locksPage(context, await shared('locks', () => source.locks()));
    } else if (path === '/job') {
      body = await jobView(context, query);
    } else if (path === '/run') {
      const id = query.get('id') ?? '';
      // An id is an execution's token (36 characters); anything else cannot be one.
      const run = id.length > 0 && id.length <= 36 ? await shared(`run\0${id}`, () => source.run(id)) : undefined;
      if (run === undefined) throw new HttpError(404, 'No such run (it may have been pruned).');
      const { slot } = run;
      const [locks, ledgers] = await Promise.all([
        shared(`locks\0${run.job}`, () => source.locks([run.job])),
        // The ledger of the run's one slot: its outcome (late, or the run that counts for it).
        slot === null
          ? []
          : shared(`slot\0${run.job}\0${slot.toISOString()}`, () =>
              source.slots({ job: run.job, since: slot, until: new Date(slot.getTime() + 1) }),
            ),
      ]);
      body = runPage(
        context,
        run,
        locks.find((lock) => lock.name === run.job),
        ledgers[0]?.slots.find((entry) => entry.slot.getTime() === slot?.getTime()),
      );
    } else {
      return notMine(res, next);
    }
    send(res, 200, body, nonce, headers, method === 'HEAD');
  }

  async function jobView(context: PageContext, query: URLSearchParams): Promise<Html> {
    let name: string;
    try {
      name = validateJobName(query.get('name'));
    } catch {
      throw new HttpError(404, 'No such job.');
    }
    const range = RANGE_NAMES.find((candidate) => candidate === query.get('range')) ?? 'fit';
    const now = new Date();
    const runsQuery: HistoryQuery =
      range === 'fit'
        ? { job: name, limit: FIT_RUNS }
        : { job: name, since: new Date(now.getTime() - RANGES[range]), limit: JOB_PAGE_RUNS };
    const [page, locks, recentRuns, recentSlots] = await Promise.all([
      shared(`job\0${range}\0${name}`, () => source.history(runsQuery)),
      shared(`locks\0${name}`, () => source.locks([name])),
      // The overview's reads for this one job (its newest runs and slots, STRIP_RUNS each): the
      // page's problems and a run's "usually" come from them, as the overview's card does.
      shared(`recent-runs\0${name}`, () => source.recentRuns([name], STRIP_RUNS)),
      shared(`recent-slots\0${name}`, () => source.recentSlots([name], STRIP_RUNS)),
    ]);
    const lock = locks.find((candidate) => candidate.name === name);
    // The slot ledger of the axis shown: its missed and overlapped slots are drawn on the timeline.
    // From the axis's start to now: the `fit` axis stretches to the newest slot no run took.
    const { from } = axis(range, page.runs, now);
    const [ledger] = await shared(`ledger\0${range}\0${name}`, () => source.slots({ job: name, since: from, until: now }));
    if (lock === undefined && page.runs.length === 0 && ledger === undefined)
      throw new HttpError(404, 'No such job (no lock row, no declared schedule, no run in this range).');
    const notice = NOTICES[query.get('notice') ?? ''];
    const { controls } = source;
    const audit = controls === undefined ? undefined : await shared(`audit\0${name}`, () => controls.audit(name));
    const submission = context.csrfToken === undefined ? undefined : newSubmissionKey();
    const recent = {
      runs: recentRuns.runs.get(name) ?? [],
      slots: recentSlots.jobs.get(name),
      now: recentRuns.now ?? recentSlots.now,
    };
    return jobPage({ ...context, submission }, { name, range, runs: page.runs, lock, now, notice, ledger, audit, recent });
  }

  /**
   * A POST that changes a job (unlock, pause, resume, trigger): refused unless controls are on,
   * `authorize` agrees and the CSRF token matches. Answers with the redirect to the job's page.
   */
  async function control(req: IncomingMessage, base: string, path: string): Promise<string> {
    if (settings.readOnly) throw new HttpError(403, 'This dashboard is read-only.');
    if (!(await allowed(req))) throw new HttpError(403, 'Not authorized to use the controls.');
    const form = await readForm(req);
    if (form === undefined || !csrf.verify(req, form.get(CSRF_FIELD) ?? undefined)) {
      throw new HttpError(403, 'The form has no valid CSRF token: reload the page and try again.');
    }
    let job: string;
    try {
      job = validateJobName(form.get('job'));
    } catch {
      throw new HttpError(400, 'The form names no valid job.');
    }
    // The same rendered form submitted again (a double click) gets the first submission's notice.
    const notice = await submissions.once(form.get(SUBMISSION_FIELD), `${path}\0${job}`, () => change(req, path, job, form));
    reads.clear();
    return `${base}/job?name=${encodeURIComponent(job)}&notice=${notice}`;
  }

  /** Applies a control POSTed from a job page, checked by `control`; returns the notice to show. */
  async function change(req: IncomingMessage, path: string, job: string, form: URLSearchParams): Promise<string> {
    let notice: string;
    let by: string;
    try {
      by = operatorName(await settings.actor?.(req));
    } catch {
      throw new HttpError(500, "The dashboard's `actor` option failed to name the operator: nothing was changed.");
    }
    if (path === '/job/unlock') {
      if (form.get('confirm') !== 'yes') throw new HttpError(400, 'Tick the box that says the process holding the lock is gone.');
      // The audit records who freed whose lock (guard.unlock).
      notice = (await source.unlock(job, by)) ? 'unlocked' : 'not-held';
    } else {
      const controls = source.controls;
      const known = CONTROL_PATHS.find((candidate) => candidate === path);
      if (controls === undefined || known === undefined) throw new HttpError(404, 'No such control.');
      try {
        notice = await applyControl(controls, known, job, form, by);
      } catch (error) {
        // The guard's own words for a bad value (TypeError) or a refusal (a paused job's trigger).
        if (error instanceof TypeError) throw new HttpError(400, error.message);
        if (error instanceof GuardError && error.code === 'JOB_PAUSED') throw new HttpError(409, error.message);
        throw error;
      }
    }
    return notice;
  }

  return (req, res, next) => {
    handle(req, res, next).catch((error: unknown) => {
      const status = statusOf(error);
      // Method, path and what failed: never the headers (cookies) nor the form (its token).
      const where = `Dashboard ${req.method ?? 'GET'} ${JSON.stringify((req.url ?? '/').split('?')[0])}`;
      if (status >= 500) logger.error(`${where} failed: ${describeFailure(error)}`);
      else if (status !== 404) logger.warn(`${where} refused (${status}): ${messageOf(error)}`);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendError(res, error, baseOf(req).base);
    });
  };
}

/** An error and its cause, on one line, for the log. */
function describeFailure(error: unknown): string {
  const message = messageOf(error);
  const cause = error instanceof Error && error.cause !== undefined ? messageOf(error.cause) : '';
  return (cause === '' || message.includes(cause) ? message : `${message}: ${cause}`).replace(/\s*\n\s*/g, ' ');
}
