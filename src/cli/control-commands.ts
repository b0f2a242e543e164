import { GuardError } from '../core/errors.js';
import type { Guard } from '../guard/create-guard.js';
import { formatTable, oneLine, printable } from './format.js';
import { formatTime } from '../core/duration.js';
import { UsageError, type CommandOptions, type CommandOutput } from './commands.js';
import { didYouMean, timeArgument, defaultActor } from './arguments.js';

/** The operator commands: pause, resume, trigger, audit (issue 17). */

function jobOf(job: string | undefined, command: string): string {
  if (job === undefined) throw new UsageError(`${command} needs a job name: cronguard ${command} <job>`);
  return job;
}

/**
 * Refuses a name the tables have never seen (no lock row, no declared schedule): a mistyped name
 * would otherwise pause nothing, or wait for a replica that never comes, and leave a row behind.
 */
async function knownJob(guard: Guard, name: string, alternative: string): Promise<void> {
  const known = await guard.jobNames();
  if (known.includes(name)) return;
  throw new UsageError(
    `no job named "${printable(name)}" has run or is scheduled.${didYouMean(name, known, (v) => `"${printable(v)}"`)} ${alternative}`.trim(),
  );
}

export async function pauseCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'pause');
  if (options.create !== true) await knownJob(guard, name, '(--create pauses a job that has not run yet)');
  const state = await guard.pause(name, {
    by: options.by ?? defaultActor(),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
    ...(options.until === undefined ? {} : { until: timeArgument(options.until, '--until') }),
  });
  const until = state.until === null ? 'until resumed' : `until ${formatTime(state.until)}`;
  const text = `Paused "${printable(name)}" ${until}: no replica starts it from its next attempt on; a run already going is not stopped.\n`;
  return { text, json: { job: name, paused: state }, exitCode: 0 };
}

export async function resumeCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'resume');
  await knownJob(guard, name, '');
  const wasPaused = await guard.resume(name, {
    by: options.by ?? defaultActor(),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  });
  const text = wasPaused ? `Resumed "${printable(name)}".\n` : `"${printable(name)}" was not paused.\n`;
  return { text, json: { job: name, resumed: wasPaused }, exitCode: 0 };
}

export async function triggerCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'trigger');
  // A request for a job no replica schedules would wait forever.
  await knownJob(guard, name, '(a trigger runs on a replica that schedules the job)');
  const id = await guard.trigger(name, { by: options.by ?? defaultActor(), force: options.force === true }).catch((error: unknown) => {
    // The API's refusal names `force: true`; the command line's names the flag.
    if (!(error instanceof GuardError) || error.code !== 'JOB_PAUSED') throw error;
    const quoted = printable(name);
    throw new UsageError(
      `"${quoted}" is paused, so it was not triggered: resume it first (cronguard resume ${quoted}), or run it anyway with cronguard trigger ${quoted} --force`,
    );
  });
  const text = `Asked for one run of "${printable(name)}" now: a replica that schedules it runs it at its next look (controlPollInterval).\n`;
  return { text, json: { job: name, requestId: id }, exitCode: 0 };
}

export async function auditCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'audit');
  const limit = options.limit === undefined ? 50 : Number(options.limit);
  if (!Number.isInteger(limit)) throw new UsageError(`--limit expects a whole number, got "${printable(options.limit ?? '')}"`);
  const entries = await guard.controls(name, { limit });
  const rows = entries.map((entry) => [formatTime(entry.at), entry.action, entry.by, formatTime(entry.until), oneLine(entry.reason)]);
  const text =
    entries.length === 0 ? `No control changes for "${printable(name)}".\n` : formatTable(['at', 'action', 'by', 'until', 'reason'], rows);
  return { text, json: entries, exitCode: 0 };
}

export async function forgetCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'forget');
  await knownJob(guard, name, '');
  const forgotten = await guard.forget(name, {
    by: options.by ?? defaultActor(),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  });
  const text = forgotten
    ? `Forgot "${printable(name)}": its lock row and declared schedule are deleted; its history stays. A replica that still runs it brings it back.\n`
    : `"${printable(name)}" was already gone.\n`;
  return { text, json: { job: name, forgotten }, exitCode: 0 };
}
