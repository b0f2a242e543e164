#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createGuard, type Guard } from '../guard/create-guard.js';
import { printable } from './format.js';
import { messageOf } from '../core/errors.js';
import { packageVersion } from '../core/package-version.js';
import { sqlitePath } from '../dialects/sqlite/connection.js';
import { dashboardCommand } from './dashboard-command.js';
import {
  doctorCommand,
  historyCommand,
  locksCommand,
  migrateCommand,
  probeCommand,
  pruneCommand,
  unlockCommand,
  versionsCommand,
  UsageError,
  type CommandOptions,
  type CommandOutput,
} from './commands.js';
import { auditCommand, forgetCommand, pauseCommand, resumeCommand, triggerCommand } from './control-commands.js';
import { didYouMean } from './arguments.js';
import { slotsCommand } from './slots-command.js';

const USAGE = `Usage: cronguard <command> [options]

Commands:
  migrate                     Create or update the cronguard tables; prints what it applied
  versions                    The schema version, and the cronguard version of each replica and lock holder
  locks                       Every lock: held or free, holder, time left
  history                     Runs, newest first
      --job <name>  --status <running|succeeded|failed|cancelled|abandoned|skipped>
      --since <24h>  --limit <50>  --before <cursor: the "next" of a --json page>
  doctor                      Per job: outcomes, durations, lockAtMostFor; exit 1 on problems
      --job <name>
      --probe  --node <url>…      Active checks of the database instead: read-only, pooler, cluster,
                                  clocks, a live race for one lock; exit 1 on a FAIL (docs/topologies.md)
  slots                       Per scheduled job, each expected slot's outcome; exit 1 if missed, late or failed
      --job <name>  --since <24h | ISO time>  --until <now | 1h (ago) | ISO time>
  prune --older-than <30d>    Delete old runs, keeping each job's newest
  unlock <job> --force        Free a lock left by a process that is gone; exit 1 if it was not locked
      --reason <text>  --by <who>  (recorded in the audit)
  forget <job>                Delete a job's lock row and declared schedule (its history stays), for a
                              job no replica runs any more   --reason <text>  --by <who>
  dashboard                   Serve the web dashboard until Ctrl-C; prints its URL
      --port <4500>  --host <127.0.0.1>  --read-only (no unlock; use it when --host is not loopback)
      --allow-host <name[:port]> (repeatable: a name a proxy or tunnel uses; others get 421)
      --base-path </cronguard> (the path a reverse proxy serves it under, passed on as is)
  pause <job>                 No replica starts the job from its next attempt on (runs going on are not stopped)
      --until <2h | ISO time>  --reason <text>  --by <who>  --create (a job that has not run yet)
  resume <job>                Lift the pause      --reason <text>  --by <who>
  trigger <job>               Run it once now on one replica that schedules it
      --force (even while paused)  --by <who>
  audit <job>                 Its control changes, newest first  --limit <50>
  help                        Show this help

Options:
  --database <url>     postgres://…, mysql://…, mariadb://…, sqlite:<path>
                       (default: $CRONGUARD_DATABASE_URL, else $DATABASE_URL)
  --table-prefix <p>   The guard's tablePrefix (default: cronguard_)
  --json               Machine-readable output
  -h, --help           Show this help
  --version            Show cronguard's version

Exit codes: 0 fine, 1 doctor found problems, slots found missed, late or failed slots, or unlock found
nothing to unlock, 2 usage or connection error, or a --job the tables have never seen.
`;

/** Options each command accepts, besides --database, --table-prefix and --json. */
const COMMAND_OPTIONS: Record<string, readonly string[]> = {
  migrate: [],
  versions: [],
  locks: [],
  history: ['job', 'status', 'since', 'limit', 'before'],
  doctor: ['job', 'probe', 'node'],
  slots: ['job', 'since', 'until'],
  prune: ['older-than'],
  unlock: ['force', 'reason', 'by'],
  forget: ['reason', 'by'],
  dashboard: ['port', 'host', 'read-only', 'allow-host', 'base-path'],
  pause: ['until', 'reason', 'by', 'create'],
  resume: ['reason', 'by'],
  trigger: ['force', 'by'],
  audit: ['limit'],
};

/** The commands that take a job name as their argument. */
const JOB_COMMANDS = new Set(['unlock', 'forget', 'pause', 'resume', 'trigger', 'audit']);

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        database: { type: 'string' },
        'table-prefix': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean' },
        job: { type: 'string' },
        status: { type: 'string' },
        since: { type: 'string' },
        limit: { type: 'string' },
        before: { type: 'string' },
        'older-than': { type: 'string' },
        force: { type: 'boolean' },
        port: { type: 'string' },
        host: { type: 'string' },
        'read-only': { type: 'boolean' },
        'allow-host': { type: 'string', multiple: true },
        'base-path': { type: 'string' },
        until: { type: 'string' },
        reason: { type: 'string' },
        by: { type: 'string' },
        probe: { type: 'boolean' },
        create: { type: 'boolean' },
        node: { type: 'string', multiple: true },
      },
    });
  } catch (error) {
    return fail(parseError(error as Error));
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help === true || command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (values.version === true) {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  if (command === undefined) {
    process.stderr.write(USAGE);
    return 2;
  }
  const allowed = COMMAND_OPTIONS[command];
  if (allowed === undefined) {
    return fail(`unknown command "${printable(command)}".${didYouMean(command, Object.keys(COMMAND_OPTIONS))} See cronguard --help`);
  }
  const stray = Object.keys(values).find((key) => !['database', 'table-prefix', 'json'].includes(key) && !allowed.includes(key));
  if (stray !== undefined) {
    const takes = allowed.length === 0 ? 'no option of its own' : allowed.map((option) => `--${option}`).join(', ');
    return fail(`${command} does not take --${stray} (it takes ${takes}; see cronguard --help)`);
  }
  const [job, extra] = rest;
  if (extra !== undefined || (job !== undefined && !JOB_COMMANDS.has(command)))
    return fail(`unexpected argument "${printable(extra ?? job ?? '')}"`);

  // An empty variable counts as unset (a blank line in an .env file), so DATABASE_URL still applies.
  const fromEnvironment = (name: string): { database: string; source: string } | undefined => {
    const value = process.env[name];
    return value === undefined || value === '' ? undefined : { database: value, source: `$${name}` };
  };
  const chosen =
    values.database === undefined
      ? (fromEnvironment('CRONGUARD_DATABASE_URL') ?? fromEnvironment('DATABASE_URL'))
      : { database: values.database, source: '--database' };
  if (chosen === undefined || chosen.database === '') {
    return fail('no database: pass --database <url>, or set CRONGUARD_DATABASE_URL or DATABASE_URL');
  }
  const { database } = chosen;
  const options: CommandOptions = {
    ...(values.job === undefined ? {} : { job: values.job }),
    ...(values.status === undefined ? {} : { status: values.status }),
    ...(values.since === undefined ? {} : { since: values.since }),
    ...(values.limit === undefined ? {} : { limit: values.limit }),
    ...(values.before === undefined ? {} : { before: values.before }),
    ...(values['older-than'] === undefined ? {} : { olderThan: values['older-than'] }),
    ...(values.force === undefined ? {} : { force: values.force }),
    ...(values.until === undefined ? {} : { until: values.until }),
    ...(values.reason === undefined ? {} : { reason: values.reason }),
    ...(values.by === undefined ? {} : { by: values.by }),
    ...(values.probe === undefined ? {} : { probe: values.probe }),
    ...(values.create === undefined ? {} : { create: values.create }),
    ...(values.node === undefined ? {} : { nodes: values.node }),
  };

  // Only migrate creates a SQLite file: a mistyped path for a read would leave an empty database behind.
  if (/^sqlite:/i.test(database)) {
    const path = sqlitePath(database);
    // migrate creates the file, never its directory: say so before it fails on a missing one.
    if (path !== ':memory:' && !existsSync(dirname(resolve(path)))) {
      return fail(
        `no directory ${dirname(resolve(path))} for the SQLite database ${path}: create it first (cronguard migrate creates the file, not its directory)`,
      );
    }
    if (command !== 'migrate' && path !== ':memory:' && !existsSync(path)) {
      return fail(`no SQLite database at ${path} (cronguard migrate creates it)`);
    }
  }

  let guard: Guard | undefined;
  try {
    // Errors are logged by the CLI itself, once, as one line; the dashboard's own (a page that
    // failed, a refused host) go to stderr as they happen.
    const toStderr = (message: string): void => void process.stderr.write(`cronguard: ${printable(message)}\n`);
    guard = createGuard({
      database,
      tablePrefix: values['table-prefix'] ?? 'cronguard_',
      logger: command === 'dashboard' ? { warn: toStderr, error: toStderr } : { warn: () => {}, error: () => {} },
    });
    const output =
      command === 'dashboard'
        ? await dashboardCommand(guard, {
            port: values.port,
            host: values.host,
            readOnly: values['read-only'],
            allowHosts: values['allow-host'] ?? [],
            ...(values['base-path'] === undefined ? {} : { basePath: values['base-path'] }),
          })
        : await run(guard, command, job, options, database);
    process.stdout.write(values.json === true ? `${JSON.stringify(output.json, null, 2)}\n` : output.text);
    return output.exitCode;
  } catch (error) {
    if (process.env.CRONGUARD_DEBUG !== undefined) console.error(error);
    return fail(describeError(error, command, chosen.source));
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

/** Every flag `main` knows, for a "did you mean" after a mistyped one. */
const FLAG_NAMES = ['database', 'table-prefix', 'json', 'help', 'version', ...new Set(Object.values(COMMAND_OPTIONS).flat())];

/** node:util's parser error in our words: the flag, the nearest known one, and where the usage is. */
function parseError(error: Error): string {
  const unknown = /Unknown option '(-{1,2})([^']*)'/.exec(error.message);
  if (unknown !== null) {
    const flag = unknown[2] ?? '';
    // A one- or two-letter flag is near every short name: no guess for it.
    const near = flag.length < 3 ? '' : didYouMean(flag, FLAG_NAMES, (v) => `--${v}`);
    return `unknown option ${unknown[1] ?? '--'}${printable(flag)}.${near} See cronguard --help`;
  }
  const missing = /Option '(-{1,2}[\w-]+)[^']*' argument missing/.exec(error.message);
  if (missing !== null) return `${missing[1] ?? 'the option'} needs a value (see cronguard --help)`;
  const ambiguous = /Option '(-{1,2}[\w-]+)' argument is ambiguous/.exec(error.message);
  if (ambiguous !== null) {
    const flag = ambiguous[1] ?? 'the option';
    return `${flag} needs a value, and the next argument looks like a flag: write ${flag}=<value> for a value that starts with "-" (see cronguard --help)`;
  }
  const valued = /Option '(-{1,2}[\w-]+)' does not take an argument/.exec(error.message);
  if (valued !== null) return `${valued[1] ?? 'the option'} takes no value (see cronguard --help)`;
  return `${error.message.split('\n')[0] ?? error.message} (see cronguard --help)`;
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
function inFlags(message: string, command: string, databaseSource: string): string {
  return message.replace(/`(\w+)`/g, (quoted, option: string) => {
    if (option === 'database') return databaseSource;
    if (option === 'name') return JOB_COMMANDS.has(command) ? 'the job name' : '--job';
    return FLAGS[option] ?? quoted;
  });
}

/** One line: the message, and the driver's reason when it is the cause. */
function describeError(error: unknown, command: string, databaseSource: string): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof TypeError) return inFlags(error.message, command, databaseSource);
  if (error instanceof UsageError) return error.message;
  const message = messageOf(error);
  const causeMessage = error.cause instanceof Error ? messageOf(error.cause) : '';
  const cause = causeMessage !== '' && !message.includes(causeMessage) ? `: ${causeMessage}` : '';
  return `${message}${cause}`.replace(/\s*\n\s*/g, ' ');
}

/**
 * The message on stderr, its lines as lines. Other control characters are written as escapes:
 * whatever a message quotes (a job name, a driver's text) must not reach the terminal raw; the
 * CLI escapes a job name's newlines itself where it quotes one.
 */
function fail(message: string): number {
  process.stderr.write(`cronguard: ${message.split('\n').map(printable).join('\n')}\n`);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
