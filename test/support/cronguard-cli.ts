// The `cronguard` command as a user runs it, with no database URL inherited from the environment:
// its command line run in this process (`cronguard`: the same parsing, commands, output and exit
// code as the bin, without a process start and module load per call), or the built bin in a child
// process (`cronguardProcess`: what the process itself adds, its exit code and streams).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { runCommandLine } from '../../src/cli/command-line.js';
import { compiledCli } from './compiled-fixtures.js';

/** The built CLI entry (`npm run build` first), bundled into one file (compiled-fixtures.ts). */
const cronguardBin = compiledCli();

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment a command runs with: this process's, the database variables cleared, then `env`. */
function environment(env: Record<string, string>): Record<string, string | undefined> {
  return { ...process.env, CRONGUARD_DATABASE_URL: '', DATABASE_URL: '', ...env };
}

/**
 * Runs `cronguard <args>` to its end in this process: what it wrote to stdout and stderr, and the
 * exit code the bin would set. `env` adds to (or overrides) the cleared database variables.
 */
export async function cronguard(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runCommandLine(args, {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    env: environment(env),
  });
  return { code, stdout, stderr };
}

/** Runs the built `cronguard` bin with `args` in a child process, to its exit. */
export async function cronguardProcess(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cronguardBin, ...args], { env: environment(env) });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
