#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createGuard, type Guard } from '../guard/create-guard.js';
import { printable } from './format.js';
import { messageOf } from '../guard/errors.js';
import { sqlitePath } from '../sqlite/connection.js';
import {
  doctorCommand,
  historyCommand,
  locksCommand,
  migrateCommand,
  pruneCommand,
  unlockCommand,
  UsageError,
  type CommandOptions,
  type CommandOutput,
} from './commands.js';

const USAGE = `Usage: cronguard <command> [options]

Commands:
  migrate                     Create or update the cronguard tables
  locks                       Every lock: held or free, holder, time left
  history                     Runs, newest first
      --job <name>  --status <running|succeeded|failed|abandoned|skipped>
      --since <24h>  --limit <50>  --before <cursor: the "next" of a --json page>
  doctor                      Per job: outcomes, durations, lockAtMostFor; exit 1 on problems
  prune --older-than <30d>    Delete old runs, keeping each job's newest
  unlock <job> --force        Free a lock left by a process that is gone

Options:
  --database <url>     postgres://…, mysql://…, sqlite:<path> (default: $CRONGUARD_DATABASE_URL)
  --table-prefix <p>   The guard's tablePrefix (default: cronguard_)
  --json               Machine-readable output
  -h, --help           Show this help

Exit codes: 0 fine, 1 doctor found problems, 2 usage or connection error.
`;

/** Options each command accepts, besides --database, --table-prefix and --json. */
const COMMAND_OPTIONS: Record<string, readonly string[]> = {
  migrate: [],
  locks: [],
  history: ['job', 'status', 'since', 'limit', 'before'],
  doctor: [],
  prune: ['older-than'],
  unlock: ['force'],
};

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
        job: { type: 'string' },
        status: { type: 'string' },
        since: { type: 'string' },
        limit: { type: 'string' },
        before: { type: 'string' },
        'older-than': { type: 'string' },
        force: { type: 'boolean' },
      },
    });
  } catch (error) {
    return fail((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help === true) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === undefined) {
    process.stderr.write(USAGE);
    return 2;
  }
  const allowed = COMMAND_OPTIONS[command];
  if (allowed === undefined) return fail(`unknown command "${command}" (see cronguard --help)`);
  const stray = Object.keys(values).find((key) => !['database', 'table-prefix', 'json'].includes(key) && !allowed.includes(key));
  if (stray !== undefined) return fail(`${command} does not take --${stray}`);
  const [job, extra] = rest;
  if (extra !== undefined || (job !== undefined && command !== 'unlock')) return fail(`unexpected argument "${extra ?? job}"`);

  const database = values.database ?? process.env.CRONGUARD_DATABASE_URL;
  if (database === undefined || database === '') return fail('no database: pass --database <url> or set CRONGUARD_DATABASE_URL');
  const options: CommandOptions = {
    ...(values.job === undefined ? {} : { job: values.job }),
    ...(values.status === undefined ? {} : { status: values.status }),
    ...(values.since === undefined ? {} : { since: values.since }),
    ...(values.limit === undefined ? {} : { limit: values.limit }),
    ...(values.before === undefined ? {} : { before: values.before }),
    ...(values['older-than'] === undefined ? {} : { olderThan: values['older-than'] }),
    ...(values.force === undefined ? {} : { force: values.force }),
  };

  // Only migrate creates a SQLite file: a mistyped path for a read would leave an empty database behind.
  if (command !== 'migrate' && /^sqlite:/i.test(database)) {
    const path = sqlitePath(database);
    if (path !== ':memory:' && !existsSync(path)) return fail(`no SQLite database at ${path} (cronguard migrate creates it)`);
  }

  let guard: Guard | undefined;
  try {
    // Errors are logged by the CLI itself, once, as one line.
    guard = createGuard({ database, tablePrefix: values['table-prefix'] ?? 'cronguard_', logger: { warn: () => {}, error: () => {} } });
    const output = await run(guard, command, job, options);
    process.stdout.write(values.json === true ? `${JSON.stringify(output.json, null, 2)}\n` : output.text);
    return output.exitCode;
  } catch (error) {
    if (process.env.CRONGUARD_DEBUG !== undefined) console.error(error);
    return fail(describeError(error));
  } finally {
    await guard?.close().catch(() => undefined);
  }
}

function run(guard: Guard, command: string, job: string | undefined, options: CommandOptions): Promise<CommandOutput> {
  switch (command) {
    case 'migrate':
      return migrateCommand(guard);
    case 'locks':
      return locksCommand(guard);
    case 'history':
      return historyCommand(guard, options);
    case 'doctor':
      return doctorCommand(guard);
    case 'prune':
      return pruneCommand(guard, options);
    default:
      return unlockCommand(guard, job, options);
  }
}

/** One line: the message, and the driver's reason when it is the cause. */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error instanceof UsageError || error instanceof TypeError) return error.message;
  const message = messageOf(error);
  const causeMessage = error.cause instanceof Error ? messageOf(error.cause) : '';
  const cause = causeMessage !== '' && !message.includes(causeMessage) ? `: ${causeMessage}` : '';
  return `${message}${cause}`.replace(/\s*\n\s*/g, ' ');
}

function fail(message: string): number {
  process.stderr.write(`cronguard: ${printable(message)}\n`);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
