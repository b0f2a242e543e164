import { hostname, userInfo } from 'node:os';
import type { Guard } from '../guard/create-guard.js';
import { formatTable, formatTime, oneLine, printable } from './format.js';
import { UsageError, type CommandOptions, type CommandOutput } from './commands.js';

/** The operator commands: pause, resume, trigger, audit (issue 17). */

/** Who the CLI records as having made a change, without --by: the user on this host. */
function defaultActor(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    // No user entry (a container running under an unnamed uid).
    return `cli@${hostname()}`;
  }
}

function jobOf(job: string | undefined, command: string): string {
  if (job === undefined) throw new UsageError(`${command} needs a job name: cronguard ${command} <job>`);
  return job;
}

/** --until: an ISO time (2026-12-01T18:00:00Z), else a duration from now (2h, 30m). */
function untilOf(value: string): Date | string {
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const at = new Date(value);
    if (Number.isNaN(at.getTime())) throw new UsageError(`--until expects a duration such as 2h or an ISO time, got "${printable(value)}"`);
    return at;
  }
  return value;
}

export async function pauseCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'pause');
  const state = await guard.pause(name, {
    by: options.by ?? defaultActor(),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
    ...(options.until === undefined ? {} : { until: untilOf(options.until) }),
  });
  const until = state.until === null ? 'until resumed' : `until ${formatTime(state.until)}`;
  const text = `Paused "${printable(name)}" ${until}: no replica starts it from its next attempt on; a run already going is not stopped.\n`;
  return { text, json: { job: name, paused: state }, exitCode: 0 };
}

export async function resumeCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'resume');
  const wasPaused = await guard.resume(name, {
    by: options.by ?? defaultActor(),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  });
  const text = wasPaused ? `Resumed "${printable(name)}".\n` : `"${printable(name)}" was not paused.\n`;
  return { text, json: { job: name, resumed: wasPaused }, exitCode: 0 };
}

export async function triggerCommand(guard: Guard, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  const name = jobOf(job, 'trigger');
  const id = await guard.trigger(name, { by: options.by ?? defaultActor(), force: options.force === true });
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
