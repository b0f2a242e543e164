import type { IncomingMessage } from 'node:http';

/** A host name as a browser sends it in `Host` or `Origin`: lower case, no trailing dot; `port` when one was given. */
export interface HostName {
  readonly name: string;
  readonly port: string | undefined;
}

/**
 * Reads `name`, `name:port`, `[v6]` or `[v6]:port` (what a `Host` header, an `Origin`'s host and
 * an allow-list entry hold). Undefined for anything else: a path, a user, spaces, an empty name.
 */
export function parseHost(value: string): HostName | undefined {
  const match = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?$/i.exec(value.trim());
  if (match === null) return undefined;
  const name = (match[1] ?? '').toLowerCase().replace(/\.$/, '');
  if (name === '' || name.startsWith('.')) return undefined;
  const port = match[2] === undefined ? undefined : String(Number(match[2]));
  return { name, port };
}

/** A `Host` without a port is the scheme's default one, which a browser leaves out. */
const DEFAULT_PORTS = new Set(['80', '443']);

/** True when `host` is `allowed`: the same name, and the same port when the entry names one. */
function matches(host: HostName, allowed: HostName): boolean {
  if (host.name !== allowed.name || allowed.port === undefined) return host.name === allowed.name;
  return host.port === undefined ? DEFAULT_PORTS.has(allowed.port) : host.port === allowed.port;
}

/** The first value of a header a chain of proxies may have appended to (`a, b`). */
function firstValue(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  const first = value?.split(',')[0]?.trim();
  return first === undefined || first === '' ? undefined : first;
}

/**
 * Which host names the dashboard answers to, and whether it believes a proxy's `X-Forwarded-Host`
 * and `X-Forwarded-Proto`. The defence against DNS rebinding: a page on another site whose name
 * re-resolves to the dashboard's address sends its own name as `Host`, which is not on the list.
 */
export class HostCheck {
  readonly #allowed: readonly HostName[] | undefined;
  readonly #trustProxy: boolean;

  /** `allowed` undefined: any host (a mounted dashboard left to the app's own routing and `authorize`). */
  constructor(allowed: readonly HostName[] | undefined, trustProxy: boolean) {
    this.#allowed = allowed;
    this.#trustProxy = trustProxy;
  }

  /** The host the browser asked for: `X-Forwarded-Host` when a proxy is trusted and sent one, else `Host`. */
  requestHost(req: IncomingMessage): string | undefined {
    const forwarded = this.#trustProxy ? firstValue(req.headers['x-forwarded-host']) : undefined;
    return forwarded ?? firstValue(req.headers.host);
  }

  /** True when the request's host is one the dashboard answers to. */
  allows(req: IncomingMessage): boolean {
    if (this.#allowed === undefined) return true;
    const host = parseHost(this.requestHost(req) ?? '');
    return host !== undefined && this.#allowed.some((allowed) => matches(host, allowed));
  }

  /**
   * True when a POST's `Origin` is one of the allowed hosts (with no list: the host the request was
   * sent to, the only name there is to compare with). A rebinding page's own cookie and token are
   * consistent, so this, with `allows`, is what refuses it.
   */
  originAllowed(req: IncomingMessage, origin: string): boolean {
    let host: HostName | undefined;
    try {
      host = parseHost(new URL(origin).host);
    } catch {
      return false;
    }
    if (host === undefined) return false;
    if (this.#allowed !== undefined) return this.#allowed.some((allowed) => matches(host, allowed));
    const requested = parseHost(this.requestHost(req) ?? '');
    return requested !== undefined && requested.name === host.name && requested.port === host.port;
  }

  /** True when the browser reached the dashboard over TLS: directly, or through a trusted proxy that says so. */
  secure(req: IncomingMessage): boolean {
    if ((req.socket as { encrypted?: boolean }).encrypted === true) return true;
    return this.#trustProxy && firstValue(req.headers['x-forwarded-proto'])?.toLowerCase() === 'https';
  }
}
