import {
  DASHBOARD_PAGE_JOBS,
  type JobNamesQuery,
  type RecentRuns,
  type RecentJobSlots,
  type RecentSlots,
} from '../../admin/dashboard-reads.js';
import type { LockRecord } from '../../admin/locks.js';
import type { RunRecord } from '../../admin/run-record.js';
import { jobProblems } from './job-summary.js';

/** How many slots (or, for a job without a declared schedule, runs) each job's strip shows. */
export const STRIP_RUNS = 50;
/** Jobs on one page of the overview. */
export const OVERVIEW_PAGE_JOBS = DASHBOARD_PAGE_JOBS;
/**
 * With the problem filter, the most pages of jobs one request looks through for jobs with a
 * problem (500 jobs): the page then links to the next names, so that a request costs at most this
 * many pages' reads, however many jobs there are and however few of them have a problem.
 */
export const PROBLEM_SCAN_PAGES = 10;
/** The longest name filter accepted (a job name is at most 255 characters). */
const MAX_FILTER_LENGTH = 255;

/** What the overview reads, from the guard's administration: each read bounded by the page. */
export interface OverviewSource {
  /** A page of job names (lock rows and declared schedules), in the database's name order. */
  jobNames(query: JobNamesQuery): Promise<string[]>;
  /** The lock rows of the jobs named. */
  locks(names: readonly string[]): Promise<LockRecord[]>;
  /** The newest runs of the jobs named, in one query. */
  recentRuns(jobs: readonly string[], perJob: number): Promise<RecentRuns>;
  /** The newest slots of the jobs named (those with a declared schedule), in a fixed number of queries. */
  recentSlots(jobs: readonly string[], perJob: number): Promise<RecentSlots>;
}

/** Which page of the overview: from the URL's `after`, `q` (names containing it) and `problems=1`. */
export interface OverviewQuery {
  readonly after: string | undefined;
  readonly contains: string | undefined;
  /** Only jobs with a problem (the slot ledger's or doctor's, as their section shows). */
  readonly problems: boolean;
}

/** One job as the overview shows it. */
export interface OverviewJob {
  readonly name: string;
  readonly lock: LockRecord | undefined;
  /** Newest first, skips left out. */
  readonly runs: readonly RunRecord[];
  /** Its newest slots, when it has a declared schedule. */
  readonly slots: RecentJobSlots | undefined;
}

/** A page of the overview. */
export interface Overview {
  readonly query: OverviewQuery;
  readonly jobs: readonly OverviewJob[];
  /** The database's clock at the read (this process's when no job is shown). */
  readonly now: Date;
  /** The `after` of the next page; undefined on the last. */
  readonly next: string | undefined;
  /** With the problem filter: the page stopped after PROBLEM_SCAN_PAGES pages of names, not after a full page of jobs. */
  readonly scanStopped: boolean;
}

/** The overview's query from the URL; anything too long is left out. */
export function overviewQuery(params: URLSearchParams): OverviewQuery {
  const text = (key: string): string | undefined => {
    const value = params.get(key);
    return value === null || value === '' || value.length > MAX_FILTER_LENGTH ? undefined : value;
  };
  return { after: text('after'), contains: text('q'), problems: params.get('problems') === '1' };
}

/** True when the job's section lists a problem. */
export function hasProblem(job: OverviewJob, now: Date): boolean {
  return jobProblems(job.name, job.runs, job.slots?.slots, now).length > 0;
}

/**
 * A page of the overview: the next OVERVIEW_PAGE_JOBS names, then their lock rows, newest runs and
 * newest slots, each read bounded by the page (never by the number of jobs or the size of the
 * history). With the problem filter, pages of names are read until OVERVIEW_PAGE_JOBS jobs with a
 * problem are found, PROBLEM_SCAN_PAGES pages at most.
 */
export async function readOverview(source: OverviewSource, query: OverviewQuery): Promise<Overview> {
  const jobs: OverviewJob[] = [];
  let after = query.after;
  let now: Date | undefined;
  for (let scanned = 0; scanned < (query.problems ? PROBLEM_SCAN_PAGES : 1); scanned += 1) {
    const names = await source.jobNames({ after, contains: query.contains, limit: OVERVIEW_PAGE_JOBS + 1 });
    const page = names.slice(0, OVERVIEW_PAGE_JOBS);
    if (page.length === 0) return { query, jobs, now: now ?? new Date(), next: undefined, scanStopped: false };
    const [locks, recent, ledger] = await Promise.all([
      source.locks(page),
      source.recentRuns(page, STRIP_RUNS),
      source.recentSlots(page, STRIP_RUNS),
    ]);
    now = recent.now ?? ledger.now;
    const lockByName = new Map(locks.map((lock) => [lock.name, lock]));
    for (const name of page) {
      const job = { name, lock: lockByName.get(name), runs: recent.runs.get(name) ?? [], slots: ledger.jobs.get(name) };
      if (query.problems && !hasProblem(job, now)) continue;
      jobs.push(job);
      // A full page of jobs with a problem: the next page starts after the last one shown.
      if (jobs.length === OVERVIEW_PAGE_JOBS && (name !== page.at(-1) || names.length > page.length)) {
        return { query, jobs, now, next: name, scanStopped: false };
      }
    }
    after = page.at(-1);
    if (names.length <= OVERVIEW_PAGE_JOBS) return { query, jobs, now, next: undefined, scanStopped: false };
  }
  return { query, jobs, now: now ?? new Date(), next: after, scanStopped: query.problems };
}
