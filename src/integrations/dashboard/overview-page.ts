import { nextExpectedSlot, slotStrip, html, segment, type Html, page, type PageContext } from './html.js';
import { formatAgo, formatTime } from '../../core/duration.js';
import { jobProblems, outcomeBadge, problemList, runStrip, stateDetail } from './job-summary.js';
import { OVERVIEW_PAGE_JOBS, PROBLEM_SCAN_PAGES, STRIP_RUNS, type Overview, type OverviewQuery } from './overview-reads.js';

/** The overview's URL for a query (the filter kept, `after` the page's start). */
function overviewHref(base: string, query: OverviewQuery, after: string | undefined): string {
  const params = new URLSearchParams();
  if (query.contains !== undefined) params.set('q', query.contains);
  if (query.problems) params.set('problems', '1');
  if (after !== undefined) params.set('after', after);
  const search = params.toString();
  return `${base}/${search === '' ? '' : `?${search}`}`;
}

/** The filter (names containing a text; only jobs with a problem) and the links to the first and next pages. */
function pageControls(context: PageContext, overview: Overview): { filter: Html; pager: Html } {
  const { query, next, scanStopped } = overview;
  const filter = html`<form class="filter" method="get" action="${context.base}/" role="search">
    <label>Name contains <input type="search" name="q" value="${query.contains ?? ''}" maxlength="255" /></label>
    <label><input type="checkbox" name="problems" value="1" ${query.problems ? html` checked` : ''} /> only jobs with a problem</label>
    <button type="submit">Filter</button>
  </form>`;
  const links = [
    query.after === undefined ? '' : html`<a href="${overviewHref(context.base, query, undefined)}">← first page</a>`,
    next === undefined ? '' : html`<a rel="next" href="${overviewHref(context.base, query, next)}">next ${OVERVIEW_PAGE_JOBS} jobs →</a>`,
  ];
  const stopped = scanStopped
    ? html`<p class="fix">
        Looked through ${PROBLEM_SCAN_PAGES * OVERVIEW_PAGE_JOBS} jobs (up to <span class="name">${next ?? ''}</span>) for problems; the
        next link looks further.
      </p>`
    : '';
  return {
    filter,
    pager: html`${stopped}
      <nav class="pager" aria-label="Pages of jobs">${links}</nav>`,
  };
}

/**
 * A page of jobs (lock rows and declared schedules, in name order, OVERVIEW_PAGE_JOBS at a time,
 * filtered by name and by problem): state, last outcome, next slot, strip, problems. A job with a
 * declared schedule has its slots in the strip and its next slot from its cron; one without, its
 * runs and a next slot guessed from their slots.
 */
export function overviewPage(context: PageContext, overview: Overview): Html {
  const { now } = overview;
  const jobs = overview.jobs.map(({ name, lock, runs, slots }, index) => {
    const last = runs[0];
    const guessed = nextExpectedSlot(runs, now);
    return html`<section class="job" aria-labelledby="job-${index}">
      <h2 id="job-${index}"><a class="name" href="${context.base}/job?name=${segment(name)}">${name}</a></h2>
      <dl>
        <dt>State</dt>
        <dd>${stateDetail(lock, { runs, now })}</dd>
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
        <dd>${problemList(jobProblems(name, runs, slots?.slots, now))}</dd>
      </dl>
    </section>`;
  });
  const { filter, pager } = pageControls(context, overview);
  const filtered = overview.query.contains !== undefined || overview.query.problems || overview.query.after !== undefined;
  return page(
    context,
    'Overview',
    html`<h1>Jobs</h1>
      ${filter}
      <div id="live" class="jobs">
        ${
          jobs.length > 0
            ? jobs
            : filtered
              ? html`<p>No job on this page matches the filter.</p>`
              : html`<p>No job has a lock row or a declared schedule yet.</p>`
        }
        ${pager}
      </div>`,
  );
}
