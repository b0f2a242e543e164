import type { Guard } from '../guard/create-guard.js';
import type { CommandOptions, CommandOutput } from './commands.js';
import { formatTable, printable } from './format.js';

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
