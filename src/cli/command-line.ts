import { parseArgs } from 'node:util';
import type { CommandOptions } from './commands.js';
import { printable } from './format.js';
import { packageVersion } from '../admin/versions.js';
import { didYouMean, fail, type CliIO } from './arguments.js';

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

/**
 * Runs one `cronguard` command line (the arguments after the command's name) and answers its exit
 * code; `io` is where its output goes and the environment it reads (`processIO` for the bin).
 */
export async function runCommandLine(argv: readonly string[], io: CliIO): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
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
    return fail(io, parseError(error as Error));
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help === true || command === 'help') {
    io.stdout(USAGE);
    return 0;
  }
  if (values.version === true) {
    io.stdout(`${packageVersion()}\n`);
    return 0;
  }
  if (command === undefined) {
    io.stderr(USAGE);
    return 2;
  }
  const allowed = COMMAND_OPTIONS[command];
  if (allowed === undefined) {
    return fail(io, `unknown command "${printable(command)}".${didYouMean(command, Object.keys(COMMAND_OPTIONS))} See cronguard --help`);
  }
  const stray = Object.keys(values).find((key) => !['database', 'table-prefix', 'json'].includes(key) && !allowed.includes(key));
  if (stray !== undefined) {
    const takes = allowed.length === 0 ? 'no option of its own' : allowed.map((option) => `--${option}`).join(', ');
    return fail(io, `${command} does not take --${stray} (it takes ${takes}; see cronguard --help)`);
  }
  const [job, extra] = rest;
  if (extra !== undefined || (job !== undefined && !JOB_COMMANDS.has(command)))
    return fail(io, `unexpected argument "${printable(extra ?? job ?? '')}"`);

  // An empty variable counts as unset (a blank line in an .env file), so DATABASE_URL still applies.
  const fromEnvironment = (name: string): { database: string; source: string } | undefined => {
    const value = io.env[name];
    return value === undefined || value === '' ? undefined : { database: value, source: `$${name}` };
  };
  const chosen =
    values.database === undefined
      ? (fromEnvironment('CRONGUARD_DATABASE_URL') ?? fromEnvironment('DATABASE_URL'))
      : { database: values.database, source: '--database' };
  if (chosen === undefined || chosen.database === '') {
    return fail(io, 'no database: pass --database <url>, or set CRONGUARD_DATABASE_URL or DATABASE_URL');
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

  // The database part (Kysely, the drivers, the guard) is loaded only now: help, a usage error or
  // a typo answers without loading it (a third of a second of module loading on every call).
  const { runCommand } = await import('./run-command.js');
  return runCommand(
    {
      command,
      job,
      options,
      database,
      databaseSource: chosen.source,
      jobCommand: JOB_COMMANDS.has(command),
      tablePrefix: values['table-prefix'] ?? 'cronguard_',
      json: values.json === true,
      dashboard: {
        port: values.port,
        host: values.host,
        readOnly: values['read-only'],
        allowHosts: values['allow-host'] ?? [],
        ...(values['base-path'] === undefined ? {} : { basePath: values['base-path'] }),
      },
    },
    io,
  );
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
