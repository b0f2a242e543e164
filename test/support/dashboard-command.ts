import { spawn } from 'node:child_process';
import { closeWhenTestEnds } from './case-cleanup.js';
import { compiledCli } from './compiled-fixtures.js';

const bin = compiledCli();

/** A running `cronguard dashboard`: its first stdout line (the URL), its stderr so far, and how to stop it. */
export interface DashboardCommand {
  readonly line: string;
  /** The URL it printed. */
  readonly url: string;
  readonly stderr: () => string;
  readonly stop: () => Promise<number | null>;
}

/** Starts the real `cronguard dashboard` (the built binary); stopped when the test ends if the test did not. */
export function startDashboardCommand(args: string[]): Promise<DashboardCommand> {
  const child = spawn(process.execPath, [bin, 'dashboard', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const stop = (): Promise<number | null> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return exited;
  };
  closeWhenTestEnds(stop);
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.includes('\n')) {
        const line = stdout.split('\n')[0] ?? '';
        resolve({ line, url: /http:\/\/\S+\//.exec(line)?.[0] ?? '', stderr: () => stderr, stop });
      }
    });
    void exited.then((code) => reject(new Error(`cronguard dashboard exited with ${code}: ${stderr}`)));
  });
}
