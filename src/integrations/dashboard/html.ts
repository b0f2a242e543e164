import type { RunRecord, RunStatus } from '../../admin/run-record.js';
import type { LedgerSlot, SlotOutcome, UnrunOutcome } from '../../core/slot-ledger.js';
import { formatDuration } from '../../core/duration.js';

/**
 * HTML that is safe to write as is: built only by the `html` tag below, which escapes every value
 * it interpolates unless that value is itself `Html`. Job names, replica names and error texts come
 * from the database and may be anything (`<img src=x onerror=alert(1)>`): they only ever reach a
 * page through this tag.
 */
export class Html {
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  toString(): string {
    return this.#text;
  }
}

/** What the `html` tag accepts: text is escaped, `Html` kept, arrays joined, null/undefined/false dropped. */
export type HtmlValue = Html | string | number | null | undefined | false | readonly HtmlValue[];

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for an element's content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ENTITIES[character] ?? character);
}

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.toString();
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  return escapeHtml(String(value));
}

/** The template tag every page is written with: interpolations are escaped. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, index) => {
    out += render(value) + (strings[index + 1] ?? '');
  });
  return new Html(out);
}

/**
 * A query value of a link: any job name or id, percent-encoded (then escaped by `html`). Names go in
 * the query, never the path, where a browser would resolve a job named '..' as a parent folder.
 */
export function segment(value: string): string {
  return encodeURIComponent(value);
}

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

/** Each outcome's text and shape: colour is never the only signal. */
export const OUTCOMES: Readonly<Record<RunStatus, { readonly symbol: string; readonly label: string }>> = {
  succeeded: { symbol: '✓', label: 'succeeded' },
  failed: { symbol: '✗', label: 'failed' },
  cancelled: { symbol: '⊘', label: 'cancelled' },
  abandoned: { symbol: '!', label: 'abandoned' },
  running: { symbol: '▶', label: 'running' },
  skipped: { symbol: '–', label: 'skipped' },
};

/**
 * The next slot the history suggests: the newest slot plus the gap between the two newest distinct
 * slots, stepped past `now`. A guess (the runs table does not keep the cron expression); undefined
 * when fewer than two runs had a slot.
 */
export function nextExpectedSlot(runs: readonly RunRecord[], now: Date): Date | undefined {
  const slots = [...new Set(runs.flatMap((run) => (run.slot === null ? [] : [run.slot.getTime()])))].sort((a, b) => b - a);
  const [newest, previous] = slots;
  if (newest === undefined || previous === undefined) return undefined;
  const gap = newest - previous;
  const steps = Math.max(1, Math.ceil((now.getTime() - newest) / gap));
  return new Date(newest + steps * gap);
}

/**
 * Each slot outcome's (core/slot-ledger.ts's SLOT_OUTCOMES) shape and word. A missed slot is drawn hollow (a dashed red box around ○),
 * an overlapped one with ⧉: neither relies on its colour.
 */
export const SLOT_MARKS: Readonly<Record<SlotOutcome, { readonly symbol: string; readonly label: string }>> = {
  succeeded: { symbol: '✓', label: 'succeeded' },
  late: { symbol: '◷', label: 'late' },
  failed: { symbol: '✗', label: 'failed' },
  cancelled: { symbol: '⊘', label: 'cancelled' },
  running: { symbol: '▶', label: 'running' },
  overlapped: { symbol: '⧉', label: 'overlapped (the lock was still held)' },
  paused: { symbol: '‖', label: 'paused' },
  missed: { symbol: '○', label: 'missed (no replica ran it)' },
};

/** A run of consecutive slots no run took, all with the same outcome (missed, or overlapped). */
export interface UnrunStretch {
  readonly outcome: UnrunOutcome;
  readonly first: Date;
  readonly last: Date;
  readonly count: number;
}

/**
 * The slots no run took, as stretches of consecutive slots with one outcome, oldest first: a job
 * that stopped running for an hour is one stretch, not 3,600 lines and marks. There are at most
 * one more stretches than slots that some run took, whatever the number of slots.
 */
export function unrunStretches(slots: readonly LedgerSlot[]): UnrunStretch[] {
  // The open stretch grows in place: a copy per slot was 10,000 objects for a week of a stopped
  // every-second job, drawn twice per page (the bench's ten pages spent their longest stretches here).
  const stretches: { outcome: UnrunOutcome; first: Date; last: Date; count: number }[] = [];
  let previous: SlotOutcome | undefined;
  for (const entry of slots) {
    const { outcome } = entry;
    if (outcome === 'missed' || outcome === 'overlapped') {
      const open = stretches.at(-1);
      if (open !== undefined && previous === outcome) {
        open.last = entry.slot;
        open.count += 1;
      } else {
        stretches.push({ outcome, first: entry.slot, last: entry.slot, count: 1 });
      }
    }
    previous = outcome;
  }
  return stretches;
}

/** The outcomes an operator must not overlook: their count is written out beside the strip. */
const ALARMING: readonly SlotOutcome[] = ['missed', 'overlapped', 'failed', 'late'];

/** A slot's outcome as a badge with its shape and its word. */
export function slotBadge(entry: LedgerSlot): Html {
  const outcome = SLOT_MARKS[entry.outcome];
  const delay = entry.delayMs === null ? '' : `, started ${formatDuration(entry.delayMs)} after its slot`;
  return html`<span class="badge slot-${entry.outcome}">${outcome.symbol} ${outcome.label}</span
    >${delay}${entry.catchUp ? ' (a catch-up run)' : ''}`;
}

/** How many slots had each outcome, in words: "47 succeeded, 3 missed". */
export function slotCounts(slots: readonly LedgerSlot[]): string {
  const counts = new Map<SlotOutcome, number>();
  for (const entry of slots) counts.set(entry.outcome, (counts.get(entry.outcome) ?? 0) + 1);
  return [...counts].map(([outcome, count]) => `${count} ${outcome}`).join(', ');
}

/** A job's newest slots as a strip of marks, oldest first, each with its shape and a title; the alarming counts in words. */
export function slotStrip(slots: readonly LedgerSlot[]): Html {
  const marks = slots.map((entry) => {
    const outcome = SLOT_MARKS[entry.outcome];
    const delay = entry.delayMs === null ? '' : `, started ${formatDuration(entry.delayMs)} after it`;
    const title = `slot ${entry.slot.toISOString()}: ${outcome.label}${delay}${entry.catchUp ? ', catch-up' : ''}`;
    return html`<span class="slot-${entry.outcome}" title="${title}">${outcome.symbol}</span>`;
  });
  const alarms = ALARMING.flatMap((outcome) => {
    const count = slots.filter((entry) => entry.outcome === outcome).length;
    return count === 0 ? [] : [html`<strong class="slot-alarm">⚠ ${count} ${outcome}</strong>`];
  });
  return html`<div class="strip" role="img" aria-label="${`last ${slots.length} slots, oldest first: ${slotCounts(slots) || 'none'}`}">
      ${marks}
    </div>
    ${alarms.length === 0 ? '' : html`<p class="slot-alarms">${alarms}</p>`}`;
}

/** The style of the slot marks (appended to the page's). */
export const SLOT_STYLE = `
.slot-succeeded{background:var(--ok)}.slot-late{background:var(--warn)}.slot-failed{background:var(--bad)}.slot-cancelled{background:var(--muted)}
.slot-running{background:var(--run)}.slot-overlapped{background:#8250df}.slot-paused{background:#6e7781}
.strip span.slot-missed,.badge.slot-missed{background:#fff;color:var(--bad);outline:2px dashed var(--bad);outline-offset:-2px;font-weight:bold}
.slot-alarms{margin:.2rem 0}.slot-alarm{color:var(--bad);margin-right:.6rem}
.timeline .slot-mark:focus{outline:3px solid #fb8f44}
`;
