// The `cronguard` command as a user runs it: the built binary in a child process, with no database
// URL inherited from the environment.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { compiledCli } from './compiled-fixtures.js';

/** The built CLI entry (`npm run build` first), bundled into one file (compiled-fixtures.ts). */
export const cronguardBin = compiledCli();

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `cronguard <args>` to its exit; `env` adds to (or overrides) the cleared database variables. */
export async function cronguard(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cronguardBin, ...args], {
      env: { ...process.env, CRONGUARD_DATABASE_URL: '', DATABASE_URL: '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
