import { formatTable, oneLine, printable } from './format.js';
import type { Guard } from '../guard/create-guard.js';
import type { RunStatus } from '../admin/run-record.js';
import { formatDuration, formatTime } from '../core/duration.js';
import { defaultActor, didYouMean, assertKnownJob, unknownJobError, UsageError } from './arguments.js';

export { UsageError } from './arguments.js';

/** What a command prints and its exit code: 0 fine, 1 doctor found problems or unlock found no lock. */
export interface CommandOutput {
  readonly text: string;
  readonly json: unknown;
  readonly exitCode: 0 | 1;
}

export interface CommandOptions {
  readonly job?: string;
  readonly status?: string;
  readonly since?: string;
  readonly limit?: string;
  /** The `next` cursor of the previous `history --json` page. */
  readonly before?: string;
  readonly olderThan?: string;
  readonly force?: boolean;
  /** pause: an ISO time or a duration from now. */
  readonly until?: string;
  readonly reason?: string;
  /** Who makes a control change, for the audit. */
  readonly by?: string;
  /** pause: also a job the tables have never seen. */
  readonly create?: boolean;
  /** doctor: the active checks of `guard.probe()` instead of the history's review. */
  readonly probe?: boolean;
  /** doctor --probe: the other nodes of the database, whose clocks are compared. */
  readonly nodes?: readonly string[];
}

/** What a holder's version shows as when it recorded none: its guard predates the replica table. */
export const UNRECORDED_VERSION = '< 0.2.0';

export async function locksCommand(guard: Guard): Promise<CommandOutput> {
  const locks = await guard.locks();
  const rows = locks.map((lock) => [
    lock.name,
    lock.state,
    lock.running ? 'yes' : 'no',
    lock.lockedBy,
    lock.version ?? UNRECORDED_VERSION,
    formatTime(lock.lockedAt),
    formatTime(lock.lockUntil),
    lock.state === 'held' ? formatDuration(lock.remainingMs) : '-',
  ]);
  const headers = ['job', 'state', 'running', 'locked by', 'version', 'locked at', 'until', 'left'];
  // The operator's pause and pending "run now" requests, in columns only when some job has one.
  if (locks.some((lock) => lock.paused !== null || lock.pendingTrigger !== null)) {
    headers.push('paused', 'paused by', 'reason', 'trigger');
    locks.forEach((lock, index) => {
      const { paused, pendingTrigger } = lock;
      rows[index]?.push(
        paused === null ? '-' : paused.until === null ? 'until resumed' : `until ${formatTime(paused.until)}`,
        paused?.by ?? '-',
        oneLine(paused?.reason ?? null, 40),
        pendingTrigger === null ? '-' : `pending (${pendingTrigger.by}${pendingTrigger.force ? ', forced' : ''})`,
      );
    });
  }
  const text = locks.length === 0 ? 'No locks yet.\n' : formatTable(headers, rows);
  return { text, json: locks, exitCode: 0 };
}

export async function historyCommand(guard: Guard, options: CommandOptions): Promise<CommandOutput> {
  const limit = options.limit === undefined ? 50 : Number(options.limit);
  if (!Number.isInteger(limit)) throw new UsageError(`--limit expects a whole number, got "${options.limit}"`);
  const page = await guard.history({
    ...(options.job === undefined ? {} : { job: options.job }),
    ...(options.status === undefined ? {} : { status: options.status as RunStatus }),
    ...(options.since === undefined ? {} : { since: options.since }),
    ...(options.before === undefined ? {} : { before: options.before }),
    limit,
  });
  // Nothing for a --job: a name the tables have never seen is a typo, exit 2 (a first page only: a later one may be empty).
  if (options.job !== undefined && page.runs.length === 0 && options.before === undefined) await assertKnownJob(guard, options.job);
  const rows = page.runs.map((run) => [
    formatTime(run.startedAt),
    run.job,
    run.status,
    formatDuration(run.durationMs),
    run.overran ? 'yes' : 'no',
    run.lockedBy,
    oneLine(run.error),
  ]);
  const text =
    page.runs.length === 0 ? 'No runs.\n' : formatTable(['started', 'job', 'status', 'duration', 'overran', 'locked by', 'error'], rows);
  return { text, json: page, exitCode: 0 };
}

export async function doctorCommand(guard: Guard, options: CommandOptions = {}): Promise<CommandOutput> {
  if (options.nodes !== undefined) throw new UsageError('--node goes with --probe: cronguard doctor --probe --node <url>');
  const all = await guard.doctor();
  // Every job the tables know is in the report (lock rows and declared schedules): one missing is a typo.
  const jobs = options.job === undefined ? all : all.filter((job) => job.job === options.job);
  if (options.job !== undefined && jobs.length === 0)
    throw unknownJobError(
      options.job,
      all.map((job) => job.job),
    );
  const rows = jobs.map((job) => [
    job.job,
    String(job.runs),
    String(job.failed),
    String(job.cancelled),
    String(job.abandoned),
    String(job.overran),
    formatDuration(job.p50Ms),
    formatDuration(job.p95Ms),
    formatDuration(job.maxMs),
    formatDuration(job.lockAtMostForMs),
    formatDuration(job.suggestedLockAtMostForMs),
    job.version ?? UNRECORDED_VERSION,
    job.problems.length === 0 ? 'ok' : 'PROBLEM',
  ]);
  const problems = jobs.flatMap((job) => job.problems.map((problem) => printable(`${job.job}: ${problem}`)));
  // Notes explain (a slot a trigger's run held off); they are no problem and leave the exit code alone.
  const notes = jobs.flatMap((job) => job.notes.map((note) => printable(`${job.job}: note: ${note}`)));
  const table = formatTable(
    [
      'job',
      'runs',
      'failed',
      'cancelled',
      'abandoned',
      'overran',
      'p50',
      'p95',
      'max',
      'lock at most for',
      'suggested',
      'version',
      'status',
    ],
    rows,
  );
  const text =
    jobs.length === 0
      ? 'No jobs yet.\n'
      : `${table}${problems.length === 0 ? '\nNo problems found.\n' : `\n${problems.join('\n')}\n`}` +
        (notes.length === 0 ? '' : `${notes.join('\n')}\n`) +
        '\nsuggested = twice the longest run, at least 10s, rounded up (10s steps under a minute, whole minutes above).\n' +
        `version = the cronguard version of the job's last holder (${UNRECORDED_VERSION}: it recorded none); see cronguard versions.\n`;
  return { text, json: jobs, exitCode: problems.length === 0 ? 0 : 1 };
}

export async function pruneCommand(guard: Guard, options: CommandOptions): Promise<CommandOutput> {
  if (options.olderThan === undefined) throw new UsageError('prune needs --older-than <duration>, such as --older-than 30d');
  const deleted = await guard.prune(options.olderThan);
  return {
    text: `Deleted ${deleted} run(s) older than ${printable(options.olderThan)}.\n`,
    json: { deleted },
    exitCode: 0,
  };
}

export async function unlockCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  if (job === undefined) throw new UsageError('unlock needs a job name: cronguard unlock <job> --force');
  if (options.force !== true) {
    throw new UsageError(
      `refusing to unlock "${printable(job)}" without --force: if its holder is still running, the next run will overlap it`,
    );
  }
  const unlocked = await guard.unlock(job, {
    by: options.by ?? defaultActor(),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  });
  // Nothing to unlock is a failure for a script (a mistyped name, or the holder finished meanwhile).
  const hint = unlocked ? '' : didYouMean(job, await guard.jobNames(), (v) => `"${printable(v)}"`);
  const text = unlocked
    ? `Unlocked "${printable(job)}" (recorded in cronguard audit).\n`
    : `"${printable(job)}" was not locked: nothing to unlock.${hint}\n`;
  return { text, json: { job, unlocked }, exitCode: unlocked ? 0 : 1 };
}

export async function versionsCommand(guard: Guard): Promise<CommandOutput> {
  const report = await guard.versions();
  const { schema } = report;
  const schemaLine =
    schema.database < schema.code
      ? `schema version ${schema.database}; this cronguard (${report.package}) needs ${schema.code}: run cronguard migrate`
      : `schema version ${schema.database} (this cronguard, ${report.package}, needs ${schema.code})`;
  const replicas =
    report.replicas.length === 0
      ? 'No replica has recorded its version (replicas before 0.2.0 do not).\n'
      : formatTable(
          ['replica', 'version', 'started', 'last seen'],
          report.replicas.map((replica) => [replica.lockedBy, replica.version, formatTime(replica.startedAt), formatTime(replica.seenAt)]),
        );
  const holders =
    report.holders.length === 0
      ? ''
      : `\n${formatTable(
          ['held job', 'locked by', 'version'],
          report.holders.map((holder) => [holder.job, holder.lockedBy, holder.version ?? UNRECORDED_VERSION]),
        )}`;
  return { text: `${schemaLine}\n\n${replicas}${holders}`, json: report, exitCode: 0 };
}

/**
 * `cronguard migrate`: what it applied (or that the tables were already up to date), and, for a
 * routine it could not create (MySQL's take procedure without CREATE ROUTINE), that it was NOT
 * created, what that costs and the GRANT that mends it. Exit 0 either way: the tables are usable.
 */
export async function migrateCommand(guard: Guard, database: string): Promise<CommandOutput> {
  const report = await guard.migrate();
  // A database migrated by a newer cronguard stays ahead: migrations only go forward.
  const ahead = report.database > report.code ? `, ahead of this cronguard's ${report.code}: a newer version migrated it` : '';
  const version = `schema version ${report.database}${ahead}`;
  const lines = [
    report.applied.length === 0
      ? `cronguard: tables already up to date (${version}); nothing applied`
      : `cronguard: applied ${report.applied.join(', ')} (${version})`,
    ...report.skippedRoutines.map((routine) => skippedRoutineLine(routine, database)),
  ];
  return { text: `${lines.join('\n')}\n`, json: { migrated: true, schema: report }, exitCode: 0 };
}

/** What a left-out take procedure costs, and the GRANT for the URL's user and database. */
function skippedRoutineLine(routine: string, database: string): string {
  const { user, schema } = accountOf(database);
  return (
    `cronguard: the stored procedure ${routine} was NOT created: this database user lacks the CREATE ROUTINE privilege. ` +
    'Everything works without it, but each replica takes a batch of locks in four statements instead of one call ' +
    '(slower ticks when many jobs fire together; no run is doubled). To create it, run ' +
    `GRANT CREATE ROUTINE ON \`${schema}\`.* TO '${user}'@'%'; (the account's host as SHOW GRANTS shows it), ` +
    'then cronguard migrate again (or run cronguard migrate once as a user who has the privilege).'
  );
}

function accountOf(database: string): { user: string; schema: string } {
  try {
    const url = new URL(database);
    return { user: decodeURIComponent(url.username) || '<user>', schema: decodeURIComponent(url.pathname.slice(1)) || '<database>' };
  } catch {
    return { user: '<user>', schema: '<database>' };
  }
}

/** `cronguard doctor --probe`: each check PASS / WARN / FAIL with its finding, then the fixes; exit 1 on a FAIL. */
export async function probeCommand(guard: Guard, options: CommandOptions): Promise<CommandOutput> {
  const report = await guard.probe(options.nodes === undefined ? {} : { nodes: options.nodes });
  const table = formatTable(
    ['check', 'status', 'finding'],
    report.checks.map((check) => [check.check, check.status.toUpperCase(), printable(check.finding)]),
  );
  const fixes = report.checks
    .filter((check) => check.status !== 'pass' && check.fix !== undefined)
    .map((check) => `${check.check}: ${printable(check.fix ?? '')}`);
  const text = `${report.server}\n\n${table}${fixes.length === 0 ? '\nEvery check passed.\n' : `\nWhat to do:\n${fixes.join('\n')}\n`}`;
  return { text, json: report, exitCode: report.status === 'fail' ? 1 : 0 };
}
