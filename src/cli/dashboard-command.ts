import { createServer } from 'node:http';
import { isIP } from 'node:net';
import type { Guard } from '../guard/create-guard.js';
import { UsageError, type CommandOutput } from './commands.js';

/** The options of `cronguard dashboard`. */
export interface DashboardCommandOptions {
  readonly port?: string;
  readonly host?: string;
  readonly readOnly?: boolean;
}

/** Loopback addresses: only this machine reaches a dashboard bound there. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Serves the dashboard until SIGINT or SIGTERM. Loopback by default; with controls (pause, resume, trigger, unlock) unless
 * --read-only, since whoever reaches a loopback port is on this machine. Bound elsewhere without
 * --read-only, anyone who reaches the port can use the controls: a warning says so.
 */
export async function dashboardCommand(guard: Guard, options: DashboardCommandOptions): Promise<CommandOutput> {
  const port = Number(options.port ?? '4500');
  if (!/^\d+$/.test(options.port ?? '4500') || port > 65_535)
    throw new UsageError(`--port must be a port number from 0 to 65535, got ${JSON.stringify(options.port)}`);
  const host = options.host ?? '127.0.0.1';
  if (host === '') throw new UsageError('--host must be a host name or an address, got ""');
  const readOnly = options.readOnly === true;
  const handler = guard.dashboard(readOnly ? { readOnly: true } : { readOnly: false, authorize: () => true });
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const url = `http://${isIP(host) === 6 ? `[${host}]` : host}:${bound}/`;
  if (!readOnly && !isLoopback(host)) {
    process.stderr.write(
      `cronguard: warning: the dashboard on ${host} has controls (pause, resume, trigger, unlock) and no login: anyone who can reach it can use them. ` +
        'Pass --read-only, or bind to 127.0.0.1 and reach it through an SSH tunnel.\n',
    );
  }
  // The signal handlers go first: a signal sent as soon as the URL is read must not find the
  // process without them (the default action would end it at once, with no exit code).
  const stopped = new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  process.stdout.write(`cronguard dashboard: ${url} (${readOnly ? 'read-only' : 'with controls'}); Ctrl-C stops it\n`);
  await stopped;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { text: '', json: { url, stopped: true }, exitCode: 0 };
}
