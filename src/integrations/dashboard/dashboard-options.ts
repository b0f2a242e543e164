import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeValue } from '../../core/errors.js';
import { parseHost, type HostName } from './http.js';

/** Options of `guard.dashboard()`. */
export interface DashboardOptions {
  /**
   * Serve pages only: no control is shown, every POST is refused. Controls need `readOnly: false`
   * and an `authorize` that returns true for the request.
   * @default true
   */
  readOnly?: boolean;
  /**
   * Decides, per request, whether it may use the controls (and see them). Required with
   * `readOnly: false`. A throw or a rejection counts as false.
   * @default none: read-only
   */
  authorize?: (req: IncomingMessage) => boolean | Promise<boolean>;
  /**
   * The path the handler is mounted under, like '/cronguard': its links start with it, and under
   * node:http it strips it from the request's URL. Under Express's `app.use(path, handler)` the
   * mount path (`req.baseUrl`) is used when this is not set.
   * @default '' (the root)
   */
  basePath?: string;
  /**
   * Who the audit records as having paused, resumed or triggered a job from the page: the
   * operator's name for the request, as your authentication knows it (the session's user, a header
   * your proxy sets). Undefined or blank records the default. The name is the user's own text: it
   * is bound as a parameter, escaped where a page shows it, cut to its first 255 characters (the
   * length `by` has everywhere), NUL and lone surrogates replaced. A throw or a rejection refuses
   * the change, so that none is recorded under the wrong name.
   * @default 'dashboard'
   */
  actor?: (req: IncomingMessage) => string | undefined | Promise<string | undefined>;
  /**
   * The host names the dashboard answers to, as a browser sends them in `Host`: `'ops.example.com'`
   * (any port) or `'ops.example.com:8443'`, `'[::1]:3000'`. A request for any other host gets 421 with
   * no page, no cookie and no token, and a POST whose `Origin` is not one of them is refused: a
   * page on another site whose name re-resolves to your server (DNS rebinding) gets nothing.
   * Unset, every host is answered and a POST's `Origin` must be the host it was sent to: your app's
   * routing and `authorize(req)` stay the real gate, which suffices when `authorize` checks a
   * credential the browser sends only to your own origin (a session cookie, an Authorization
   * header). Set it whenever `authorize` does not (`() => true`, a check of the client's address).
   * @default undefined: any host
   */
  allowedHosts?: readonly string[];
  /**
   * Believe a reverse proxy's `X-Forwarded-Host` (the host checked against `allowedHosts` and
   * compared with a POST's `Origin`) and `X-Forwarded-Proto` (`https` makes the CSRF cookie
   * `Secure`). Turn it on only when every request comes through a proxy that sets (or strips)
   * these headers: a client reaching the dashboard directly could send them itself.
   * @default false
   */
  trustProxy?: boolean;
}

/**
 * The dashboard: a plain Node request handler. Mounted connect-style (Express), it calls `next()`
 * for a path that is not its own; alone, it answers 404.
 */
export type DashboardHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

export interface ResolvedDashboardOptions {
  readonly readOnly: boolean;
  readonly authorize: ((req: IncomingMessage) => boolean | Promise<boolean>) | undefined;
  readonly basePath: string | undefined;
  readonly actor: ((req: IncomingMessage) => string | undefined | Promise<string | undefined>) | undefined;
  /** Undefined: any host. */
  readonly allowedHosts: readonly HostName[] | undefined;
  readonly trustProxy: boolean;
}

function hostList(value: unknown): readonly HostName[] | undefined {
  if (value === undefined) return undefined;
  const expected = "Expected `allowedHosts` of the dashboard to be an array of host names like 'ops.example.com' or 'localhost:4500'";
  if (!Array.isArray(value)) throw new TypeError(`${expected}, got ${describeValue(value)}`);
  return value.map((entry: unknown) => {
    const host = typeof entry === 'string' ? parseHost(entry) : undefined;
    if (host === undefined) throw new TypeError(`${expected}, got ${describeValue(entry)} in it`);
    return host;
  });
}

/** Validates the options now, with a `TypeError` naming the option and the value. */
export function resolveDashboardOptions(options: unknown): ResolvedDashboardOptions {
  if (options === undefined)
    return { readOnly: true, authorize: undefined, basePath: undefined, actor: undefined, allowedHosts: undefined, trustProxy: false };
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected the dashboard's options to be an object, got ${describeValue(options)}`);
  }
  const { readOnly, authorize, basePath, actor, allowedHosts, trustProxy } = options as Record<string, unknown>;
  if (readOnly !== undefined && typeof readOnly !== 'boolean') {
    throw new TypeError(`Expected \`readOnly\` of the dashboard to be a boolean, got ${describeValue(readOnly)}`);
  }
  if (authorize !== undefined && typeof authorize !== 'function') {
    throw new TypeError(`Expected \`authorize\` of the dashboard to be a function (req) => boolean, got ${describeValue(authorize)}`);
  }
  if (readOnly === false && authorize === undefined) {
    throw new TypeError(
      'Expected `authorize` of the dashboard to be a function (req) => boolean with `readOnly: false`, got undefined: ' +
        'controls need a check of who is asking',
    );
  }
  if (basePath !== undefined && (typeof basePath !== 'string' || !/^(\/[^/?#\s]+)*\/?$/.test(basePath))) {
    throw new TypeError(`Expected \`basePath\` of the dashboard to be a path like '/cronguard', got ${describeValue(basePath)}`);
  }
  if (actor !== undefined && typeof actor !== 'function') {
    throw new TypeError(`Expected \`actor\` of the dashboard to be a function (req) => string | undefined, got ${describeValue(actor)}`);
  }
  if (trustProxy !== undefined && typeof trustProxy !== 'boolean') {
    throw new TypeError(`Expected \`trustProxy\` of the dashboard to be a boolean, got ${describeValue(trustProxy)}`);
  }
  return {
    allowedHosts: hostList(allowedHosts),
    trustProxy: trustProxy === true,
    readOnly: readOnly !== false,
    authorize: authorize as ResolvedDashboardOptions['authorize'],
    basePath: basePath === undefined ? undefined : basePath.replace(/\/$/, ''),
    actor: actor as ResolvedDashboardOptions['actor'],
  };
}
