#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { createGuard } from '../guard/create-guard.js';
import { GuardError } from '../guard/errors.js';

const USAGE = `Usage: cronguard <command> [options]

Commands:
  migrate              Create or update the cronguard tables

Options:
  --database <url>     postgres://…, mysql://…, sqlite:<path> (default: $CRONGUARD_DATABASE_URL)
  --table-prefix <p>   The guard's tablePrefix (default: cronguard_)
  -h, --help           Show this help
`;

/** Exit codes: 0 fine, 2 a usage or connection error. */
export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        database: { type: 'string' },
        'table-prefix': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    return usageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help === true || command === undefined) {
    process.stdout.write(USAGE);
    return command === undefined && values.help !== true ? 2 : 0;
  }
  if (command !== 'migrate') return usageError(`unknown command "${command}"`);
  if (rest.length > 0) return usageError(`unexpected argument "${rest[0]}"`);
  const database = values.database ?? process.env.CRONGUARD_DATABASE_URL;
  if (database === undefined || database === '') {
    return usageError('no database: pass --database <url> or set CRONGUARD_DATABASE_URL');
  }
  try {
    const guard = createGuard({ database, tablePrefix: values['table-prefix'] ?? 'cronguard_' });
    try {
      await guard.migrate();
    } finally {
      await guard.close();
    }
  } catch (error) {
    if (error instanceof TypeError || error instanceof GuardError) return usageError(error.message);
    throw error;
  }
  process.stdout.write('cronguard: tables are up to date\n');
  return 0;
}

function usageError(message: string): number {
  process.stderr.write(`cronguard: ${message}\n`);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
