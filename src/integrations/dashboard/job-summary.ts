import { diagnoseJob, type RunsDiagnosis } from '../../admin/doctor.js';
import type { LockRecord } from '../../admin/locks.js';
import type { RunRecord, RunStatus } from '../../admin/run-record.js';
import type { LedgerSlot } from '../../core/slot-ledger.js';
import { OUTCOMES, html, type Html } from './html.js';
import { formatDuration, formatTime } from '../../core/duration.js';

/** Where a job stands now, from its lock row: paused (by an operator) first, whatever its lock. */
export type JobState = 'idle' | 'running' | 'held' | 'paused';

export function jobState(lock: LockRecord | undefined): JobState {
  if ((lock?.paused ?? null) !== null) return 'paused';
  if (lock === undefined || lock.state === 'free') return 'idle';
  return lock.running ? 'running' : 'held';
}

const STATE_TEXT: Readonly<Record<JobState, string>> = {
  idle: '○ idle',
  running: '▶ running',
  held: '■ held (lockAtLeastFor)',
  paused: '‖ paused',
};

export function stateBadge(state: JobState): Html {
  const colour = state === 'idle' ? 'cancelled' : state === 'running' ? 'running' : state === 'paused' ? 'failed' : 'abandoned';
  return html`<span class="badge ${colour}">${STATE_TEXT[state]}</span>`;
}

/** A job's newest runs (newest first) and the database's clock they were read at: what "usually" is measured on. */
export interface RecentRunsOfJob {
  readonly runs: readonly RunRecord[];
  readonly now: Date;
}

/**
 * A run that has been running longer than the job's usual duration (the median of its finished
 * runs among the newest read): how long, how long it usually takes, and when its lock expires. A
 * holder killed with `kill -9` still looks "running" until then; this says how much that is.
 */
export function overdueRun(lock: LockRecord | undefined, recent: RecentRunsOfJob | undefined): Html {
  if (lock === undefined || recent === undefined || jobState(lock) !== 'running') return html``;
  const usualMs = diagnose(lock.name, recent.runs, recent.now).p50Ms;
  if (usualMs === null) return html``;
  // The holder's own run row when it is among those read (its start), else when it took the lock.
  const run = recent.runs.find((candidate) => candidate.status === 'running' && candidate.lockedBy === lock.lockedBy);
  const runningMs = recent.now.getTime() - (run?.startedAt ?? lock.lockedAt).getTime();
  if (runningMs <= usualMs) return html``;
  return html`<span class="problem overdue"
    >running for ${formatDuration(runningMs)}, usually ${formatDuration(usualMs)}; its lock expires at ${formatTime(lock.lockUntil)}</span
  >`;
}

/** The job's state badge; for a paused job who paused it, why and until when; for a run longer than usual, how long. */
export function stateDetail(lock: LockRecord | undefined, recent?: RecentRunsOfJob): Html {
  const badge = stateBadge(jobState(lock));
  const paused = lock?.paused;
  if (paused === undefined || paused === null) return html`${badge} ${overdueRun(lock, recent)}`;
  return html`${badge}
    <span class="pause"
      >by <span class="name">${paused.by}</span> at ${formatTime(paused.at)}${paused.reason === null ? '' : html`: “${paused.reason}”`},
      ${paused.until === null ? 'until resumed' : `until ${formatTime(paused.until)}`}</span
    >`;
}

/** An outcome as a coloured badge with its shape and its word. */
export function outcomeBadge(status: RunStatus, overran = false): Html {
  const outcome = OUTCOMES[status];
  return html`<span class="badge ${status}">${outcome.symbol} ${outcome.label}</span
    >${overran ? html` <span class="overran">⚠ overran</span>` : ''}`;
}

/** The job's last runs as a strip of small marks, oldest first, each with its shape and a title. */
export function runStrip(runs: readonly RunRecord[]): Html {
  const counts = new Map<string, number>();
  for (const run of runs) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
  const summary = [...counts].map(([status, count]) => `${count} ${status}`).join(', ');
  const marks = [...runs].reverse().map((run) => {
    const outcome = OUTCOMES[run.status];
    const title = `${outcome.label}${run.overran ? ', overran' : ''}, ${run.startedAt.toISOString()}, ${formatDuration(run.durationMs)}, on ${run.lockedBy}`;
    return html`<span class="${run.status}" title="${title}">${run.overran ? '⚠' : outcome.symbol}</span>`;
  });
  return html`<div class="strip" role="img" aria-label="${`last ${runs.length} runs, oldest first: ${summary || 'none'}`}">${marks}</div>`;
}

/** Doctor's diagnosis of the runs shown (not skips), and a fix for each problem. */
export function diagnose(job: string, runs: readonly RunRecord[], now: Date): RunsDiagnosis {
  return diagnoseJob(
    job,
    runs.filter((run) => run.status !== 'skipped'),
    now,
  );
}

/** A problem the page shows (the slot ledger's or doctor's), and what to do about it. */
export interface ProblemWithFix {
  readonly problem: string;
  readonly fix: string;
}

/**
 * The slot ledger's problems among the slots a strip shows (no read of their own), as `cronguard
 * doctor` reports them over the last day: slots no replica ran, and slots that started late.
 */
export function slotProblems(job: string, slots: readonly LedgerSlot[]): ProblemWithFix[] {
  const count = (outcome: LedgerSlot['outcome']): number => slots.filter((entry) => entry.outcome === outcome).length;
  const missed = count('missed');
  const late = count('late');
  const problems: ProblemWithFix[] = [];
  if (missed > 0) {
    problems.push({
      problem: `${missed} of its last ${slots.length} slot(s) missed: no replica ran them`,
      fix: `check that a replica schedules the job and was up then (\`cronguard slots --job ${JSON.stringify(job)}\` lists the slots); \`catchUp\` runs the newest missed one`,
    });
  }
  if (late > 0) {
    problems.push({
      problem: `${late} of its last ${slots.length} slot(s) started late (more than a tenth of the interval after their slot)`,
      fix: "the replicas' event loops or the database were slow at the slot: see the start delay (`cronguard.start_delay`)",
    });
  }
  return problems;
}

/** What to do about each of doctor's problems. */
function doctorProblems(diagnosis: RunsDiagnosis): ProblemWithFix[] {
  const suggested = diagnosis.suggestedLockAtMostForMs;
  return diagnosis.problems.map((problem): ProblemWithFix => {
    let fix = 'see docs/operations in the README';
    if (/lockAtMostFor|overran/.test(problem)) {
      fix = suggested === null ? 'raise lockAtMostFor above the longest run' : `raise lockAtMostFor to about ${formatDuration(suggested)}`;
    } else if (problem.includes('abandoned')) {
      fix = "a replica died or overran while running it: read that replica's logs (the run's page names it)";
    } else if (problem.includes("still 'running'")) {
      fix = 'if that process is gone, unlock the job (its page, or `cronguard unlock <job> --force`)';
    } else if (problem.includes('before its time')) {
      fix = "sync the replicas' clocks with NTP";
    }
    return { problem, fix };
  });
}

/**
 * A job's problems, the slot ledger's then doctor's, from its newest runs (newest first) and, when
 * it has a declared schedule, its newest slots: the one computation behind the overview's card, its
 * problem filter and the job page, which read the same newest runs and slots, so they agree.
 */
export function jobProblems(
  job: string,
  runs: readonly RunRecord[],
  slots: readonly LedgerSlot[] | undefined,
  now: Date,
): ProblemWithFix[] {
  return [...(slots === undefined ? [] : slotProblems(job, slots)), ...doctorProblems(diagnose(job, runs, now))];
}

/** The problems with what to do about each, or "No problem found." */
export function problemList(problems: readonly ProblemWithFix[]): Html {
  if (problems.length === 0) return html`<p>No problem found.</p>`;
  return html`<ul>
    ${problems.map(({ problem, fix }) => html`<li><span class="problem">⚠ ${problem}</span><br /><span class="fix">Fix: ${fix}</span></li>`)}
  </ul>`;
}
