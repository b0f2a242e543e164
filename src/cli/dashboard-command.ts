import { createServer, type RequestListener } from 'node:http';
import { isIP } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';
import type { Guard } from '../guard/create-guard.js';
import { parseHost } from '../integrations/dashboard/http.js';
import { UsageError, type CommandOutput } from './commands.js';
import type { CliIO } from './arguments.js';
import { printable } from './format.js';

/** The options of `cronguard dashboard`. */
export interface DashboardCommandOptions {
  readonly port?: string;
  readonly host?: string;
  readonly readOnly?: boolean;
  /** More host names it answers to (--allow-host, repeatable): a proxy's or a tunnel's. */
  readonly allowHosts?: readonly string[];
  /** The path a reverse proxy serves it under and passes on as is (--base-path). */
  readonly basePath?: string;
}

/** Loopback addresses: only this machine reaches a dashboard bound there. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** An address as a Host header holds it: an IPv6 one in brackets. */
function asHostName(address: string): string {
  return isIP(address) === 6 ? `[${address}]` : address;
}

/**
 * The names the dashboard answers to, each with its port: the address it is bound to (the URL it prints); the loopback
 * names when bound to loopback; every address of this machine and its host name when bound to all
 * of them (0.0.0.0, ::); then each --allow-host. A page on any other name (DNS rebinding) gets 421.
 */
export function ownHostNames(host: string, port: number, extra: readonly string[]): string[] {
  const names = [host];
  if (isLoopback(host) || host === '0.0.0.0' || host === '::') names.push('localhost', '127.0.0.1', '::1');
  if (host === '0.0.0.0' || host === '::') {
    names.push(hostname());
    for (const addresses of Object.values(networkInterfaces())) for (const { address } of addresses ?? []) names.push(address);
  }
  const own = names.map((name) => `${asHostName(name)}:${port}`);
  return [...new Set([...own, ...extra])];
}

/**
 * Serves the dashboard until SIGINT or SIGTERM. Loopback by default; with controls (pause, resume, trigger, unlock) unless
 * --read-only, since whoever reaches a loopback port is on this machine. Bound elsewhere without
 * --read-only, anyone who reaches the port can use the controls: a warning says so.
 */
export async function dashboardCommand(guard: Guard, options: DashboardCommandOptions, io: CliIO): Promise<CommandOutput> {
  const port = Number(options.port ?? '4500');
  if (!/^\d+$/.test(options.port ?? '4500') || port > 65_535)
    throw new UsageError(`--port must be a port number from 0 to 65535, got ${JSON.stringify(options.port)}`);
  const host = options.host ?? '127.0.0.1';
  if (host === '') throw new UsageError('--host must be a host name or an address, got ""');
  const readOnly = options.readOnly === true;
  if (options.basePath !== undefined && !/^(\/[^/?#\s]+)+\/?$/.test(options.basePath))
    throw new UsageError(`--base-path must be a path like /cronguard, got "${printable(options.basePath)}"`);
  const extra = options.allowHosts ?? [];
  const bad = extra.find((name) => parseHost(name) === undefined);
  if (bad !== undefined)
    throw new UsageError(`--allow-host must be a host name like proxy.example.com or proxy.example.com:8443, got "${printable(bad)}"`);
  // The handler needs the port the server got (--port 0): requests wait for it in the listen callback.
  let handler: RequestListener = (_req, res) => void res.writeHead(503).end();
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address !== null ? address.port : port;
      const allowedHosts = ownHostNames(host, bound, extra);
      const mounted = { allowedHosts, ...(options.basePath === undefined ? {} : { basePath: options.basePath }) };
      handler = guard.dashboard(readOnly ? { readOnly: true, ...mounted } : { readOnly: false, authorize: () => true, ...mounted });
      resolve();
    });
  });
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const url = `http://${asHostName(host)}:${bound}${options.basePath?.replace(/\/$/, '') ?? ''}/`;
  if (!readOnly && !isLoopback(host)) {
    io.stderr(
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
  io.stdout(`cronguard dashboard: ${url} (${readOnly ? 'read-only' : 'with controls'}); Ctrl-C stops it\n`);
  await stopped;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return { text: '', json: { url, stopped: true }, exitCode: 0 };
}
