import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { inspect } from 'node:util';
import { createGuard, type Guard } from '../guard/create-guard.js';
import { messageOf } from '../core/errors.js';
import { sqlitePath } from '../dialects/sqlite/connection.js';
import { printable } from './format.js';
import { dashboardCommand, type DashboardCommandOptions } from './dashboard-command.js';
import {
  doctorCommand,
  historyCommand,
  locksCommand,
  migrateCommand,
  probeCommand,
  pruneCommand,
  unlockCommand,
  versionsCommand,
  type CommandOptions,
  type CommandOutput,
} from './commands.js';
import { auditCommand, forgetCommand, pauseCommand, resumeCommand, triggerCommand } from './control-commands.js';
import { slotsCommand } from './slots-command.js';
import { fail, UsageError, type CliIO } from './arguments.js';

/** A command line that parsed: the command, its job and options, and where its database came from. */
export interface CommandRequest {
  readonly command: string;
  readonly job: string | undefined;
  readonly options: CommandOptions;
  readonly database: string;
  /** `--database`, `$CRONGUARD_DATABASE_URL` or `$DATABASE_URL`: named in a bad URL's message. */
  readonly databaseSource: string;
  /** Whether the command takes a job name as its argument (a `TypeError` about `name` names it so). */
  readonly jobCommand: boolean;
  readonly tablePrefix: string;
  readonly json: boolean;
  readonly dashboard: DashboardCommandOptions;
}

/** Opens the guard on the database, runs the command, prints its output; the exit code. */
export async function runCommand(request: CommandRequest, io: CliIO): Promise<number> {
  const { command, job, options, database } = request;
  // Only migrate creates a SQLite file: a mistyped path for a read would leave an empty database behind.
  if (/^sqlite:/i.test(database)) {
    const path = sqlitePath(database);
    // migrate creates the file, never its directory: say so before it fails on a missing one.
    if (path !== ':memory:' && !existsSync(dirname(resolve(path)))) {
      return fail(
        io,
        `no directory ${dirname(resolve(path))} for the SQLite database ${path}: create it first (cronguard migrate creates the file, not its directory)`,
      );
    }
    if (command !== 'migrate' && path !== ':memory:' && !existsSync(path)) {
      return fail(io, `no SQLite database at ${path} (cronguard migrate creates it)`);
    }
  }

  let guard: Guard | undefined;
  try {
    // Errors are logged by the CLI itself, once, as one line; the dashboard's own (a page that
    // failed, a refused host) go to stderr as they happen.
    const toStderr = (message: string): void => io.stderr(`cronguard: ${printable(message)}\n`);
    guard = createGuard({
      database,
      tablePrefix: request.tablePrefix,
      logger: command === 'dashboard' ? { warn: toStderr, error: toStderr } : { warn: () => {}, error: () => {} },
    });
    const output =
      command === 'dashboard' ? await dashboardCommand(guard, request.dashboard, io) : await run(guard, command, job, options, database);
    io.stdout(request.json ? `${JSON.stringify(output.json, null, 2)}\n` : output.text);
    return output.exitCode;
  } catch (error) {
    if (io.env['CRONGUARD_DEBUG'] !== undefined) io.stderr(`${inspect(error)}\n`);
    return fail(io, describeError(error, request));
  } finally {
    await guard?.close().catch(() => undefined);
  }
}

function run(guard: Guard, command: string, job: string | undefined, options: CommandOptions, database: string): Promise<CommandOutput> {
  switch (command) {
    case 'migrate':
      return migrateCommand(guard, database);
    case 'versions':
      return versionsCommand(guard);
    case 'locks':
      return locksCommand(guard);
    case 'history':
      return historyCommand(guard, options);
    case 'doctor':
      return options.probe === true ? probeCommand(guard, options) : doctorCommand(guard, options);
    case 'slots':
      return slotsCommand(guard, options);
    case 'prune':
      return pruneCommand(guard, options);
    case 'pause':
      return pauseCommand(guard, job, options);
    case 'resume':
      return resumeCommand(guard, job, options);
    case 'trigger':
      return triggerCommand(guard, job, options);
    case 'audit':
      return auditCommand(guard, job, options);
    case 'forget':
      return forgetCommand(guard, job, options);
    default:
      return unlockCommand(guard, job, options);
  }
}

/** The command line's flag for each option of the API that a `TypeError` names. */
const FLAGS: Readonly<Record<string, string>> = {
  tablePrefix: '--table-prefix',
  olderThan: '--older-than',
  since: '--since',
  limit: '--limit',
  status: '--status',
  before: '--before',
  until: '--until',
  reason: '--reason',
  by: '--by',
  force: '--force',
};

/**
 * A `TypeError` of the API in the command line's words: `olderThan` becomes --older-than, `database`
 * the flag or variable it came from, and a job's `name` the --job option or the unlock argument.
 */
function inFlags(message: string, request: CommandRequest): string {
  return message.replace(/`(\w+)`/g, (quoted, option: string) => {
    if (option === 'database') return request.databaseSource;
    if (option === 'name') return request.jobCommand ? 'the job name' : '--job';
    return FLAGS[option] ?? quoted;
  });
}

/** One line: the message, and the driver's reason when it is the cause. */
function describeError(error: unknown, request: CommandRequest): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof TypeError) return inFlags(error.message, request);
  if (error instanceof UsageError) return error.message;
  const message = messageOf(error);
  const causeMessage = error.cause instanceof Error ? messageOf(error.cause) : '';
  const cause = causeMessage !== '' && !message.includes(causeMessage) ? `: ${causeMessage}` : '';
  return `${message}${cause}`.replace(/\s*\n\s*/g, ' ');
}
