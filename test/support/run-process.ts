import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** What the package's "exports" point at; the fixtures load cronguard from there. */
export const builtEntry = fileURLToPath(new URL('../../dist/src/index.js', import.meta.url));

export function assertBuilt(): void {
  if (!existsSync(builtEntry)) throw new Error(`${builtEntry} is missing: run \`npm run build\` first`);
}

export interface ProcessResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Everything a process printed, for assertion messages. */
export function describeResult(command: string, result: ProcessResult): string {
  return `${command} exited with ${result.code ?? result.signal}\n--- stdout ---\n${result.stdout}\n--- stderr ---\n${result.stderr}`;
}

/**
 * Runs a command to its end and collects its output. The environment is the test's without
 * NODE_OPTIONS, so that `node` runs plain (no loader or flag of the test runner's).
 */
export function runProcess(command: string, args: readonly string[], cwd: string, timeoutMs = 50_000): Promise<ProcessResult> {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
