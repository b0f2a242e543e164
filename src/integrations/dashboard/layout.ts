import { Html, html } from './html.js';
import { SLOT_STYLE } from './slot-marks.js';

/**
 * Seconds between two refreshes of an open page. A refresh costs at most eight queries on migrated
 * tables (the job page: its runs, the lock rows and the replicas, its slot ledger's clock,
 * schedule, pauses and runs, and the audit; the overview seven: the lock rows and the replicas,
 * every job's newest runs, the ledger's four), ten at the first (history() and locks() read the
 * schema version until it shows the controls), so an open page costs under one query a second,
 * whatever the number of jobs.
 */
export const REFRESH_SECONDS = 10;

/** What every page shares: where the dashboard is mounted, and the CSP nonce of this response. */
export interface PageContext {
  /** The mount path, without a trailing slash ('' at the root). */
  readonly base: string;
  readonly nonce: string;
  /** The CSRF token of this browser, when this request may use controls. */
  readonly csrfToken: string | undefined;
  /** The key of this rendering's control forms (`submissions.ts`): submitted twice, a form changes things once. */
  readonly submission?: string | undefined;
}

const STYLE = `
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--run:#0969da;--muted:#57606a;--line:#d0d7de;font-family:system-ui,sans-serif;color:#1f2328;background:#fff}
body{margin:0}header{display:flex;flex-wrap:wrap;gap:1rem;align-items:center;padding:.6rem 1rem;background:#24292f;color:#fff}
header a{color:#fff}header strong{margin-right:auto}main{padding:1rem;max-width:80rem}
a:focus-visible,button:focus-visible,select:focus-visible,input:focus-visible{outline:3px solid #fb8f44;outline-offset:2px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
.scroll{overflow-x:auto}.name{font-family:ui-monospace,monospace;word-break:break-all}
.strip{display:flex;flex-wrap:wrap;gap:1px;max-width:32rem}.strip span{display:inline-block;width:1rem;line-height:1.3rem;text-align:center;font-size:.75rem;color:#fff;border-radius:2px}
.succeeded{background:var(--ok)}.failed{background:var(--bad)}.cancelled{background:var(--muted)}.abandoned{background:var(--warn)}.running{background:var(--run)}.skipped{background:#8c959f}
.badge{display:inline-block;padding:0 .4rem;border-radius:1rem;color:#fff;white-space:nowrap}
.problem{color:var(--bad)}.fix{color:var(--muted)}.overran{color:var(--bad);font-weight:bold}
.timeline{width:100%;height:auto;border:1px solid var(--line)}.timeline a:focus rect{stroke:#fb8f44;stroke-width:3}
.placeholder{border:1px dashed var(--line);padding:.5rem;color:var(--muted)}
.control{border:1px solid var(--line);border-radius:6px;padding:0 .8rem .6rem;margin:.6rem 0}.control h3{margin:.5rem 0;font-size:1rem}.pause{color:var(--bad)}
.jobs{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,30rem),1fr));gap:1rem}.job{border:1px solid var(--line);border-radius:6px;padding:0 1rem}.job h2{font-size:1.2rem}
.job ul{margin:0;padding-left:1rem}pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:.5rem}
dd p{margin:0}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dd{margin:0}
@media (max-width:40rem){main{padding:.5rem}th,td{padding:.2rem}.wide{display:none}}
`;

/**
 * The client's part, all of it: every REFRESH_SECONDS while the tab is visible, fetch this same page
 * and swap its live region in. Without JavaScript the page is complete as served; the
 * <noscript> tells the reader to reload. Never refreshes while focus is inside the live region.
 */
const SCRIPT = `
(function(){var live=document.getElementById('live');if(!live)return;
setInterval(function(){if(document.hidden||live.contains(document.activeElement))return;
fetch(location.href,{headers:{'X-Cronguard-Refresh':'1'},credentials:'same-origin'}).then(function(r){return r.ok?r.text():null}).then(function(t){
if(t===null)return;var next=new DOMParser().parseFromString(t,'text/html').getElementById('live');if(next)live.replaceWith(next),live=next;
var s=document.getElementById('updated');if(s)s.textContent='updated '+new Date().toLocaleTimeString();}).catch(function(){});},${REFRESH_SECONDS * 1_000});})();
`;

/** A whole page: header with navigation, the page's content, the style and the refresh script. */
export function page(context: PageContext, title: string, content: Html): Html {
  const { base } = context;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · cronguard</title>
        <style nonce="${context.nonce}">
          ${new Html(STYLE + SLOT_STYLE)}
        </style>
      </head>
      <body>
        <header>
          <strong>cronguard</strong>
          <nav aria-label="Dashboard"><a href="${base}/">Overview</a> · <a href="${base}/locks">Locks</a></nav>
          <span id="updated" aria-live="off">live: refreshes every ${REFRESH_SECONDS} s</span>
        </header>
        <main>
          ${content} <noscript><p class="fix">JavaScript is off: reload the page to see new runs.</p></noscript>
        </main>
        <script nonce="${context.nonce}">
          ${new Html(SCRIPT)};
        </script>
      </body>
    </html>`;
}
