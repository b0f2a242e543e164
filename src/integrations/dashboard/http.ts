import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes, createHmac, timingSafeEqual } from 'node:crypto';
import { GuardError } from '../../core/errors.js';
import { html, type Html, page } from './html.js';

/** A form is small: a token and a few fields. */
const MAX_BODY_BYTES = 16 * 1_024;

/**
 * The fields of a POSTed form (application/x-www-form-urlencoded). A body a framework has already
 * parsed (Express's `urlencoded()` sets `req.body`) is read from there. Undefined for any other
 * content type or an oversized body.
 */
export async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const parsed = (req as IncomingMessage & { body?: unknown }).body;
  if (typeof parsed === 'object' && parsed !== null && !Buffer.isBuffer(parsed)) {
    const fields = new URLSearchParams();
    for (const [key, value] of Object.entries(parsed)) if (typeof value === 'string') fields.append(key, value);
    return fields;
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') return undefined;
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** The form field of a control form's submission key. */
export const SUBMISSION_FIELD = 'submission';
/** How long a submission's outcome is remembered: a double click, a resend after a slow answer. */
const REMEMBER_MS = 10 * 60_000;
/** The most submissions remembered; the oldest are forgotten first. */
const MAX_REMEMBERED = 10_000;

/** A new submission key for one rendering of a form. */
export function newSubmissionKey(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * The control forms' idempotency: each rendered form carries a random key, and the same key
 * submitted again (a double click on "Run now", a browser resending the POST) gets the first
 * submission's outcome without changing anything again. In memory, per dashboard: across
 * dashboards, `guard.trigger()` returning a pending trigger keeps a double submit to one run.
 */
export class Submissions {
  readonly #outcomes = new Map<string, { at: number; outcome: Promise<string> }>();

  /**
   * The outcome of the submission `key` of `scope` (the control and the job): `apply()`'s, run once.
   * A failed one is forgotten, so that submitting the form again retries it. No key: run as is.
   */
  once(key: string | null, scope: string, apply: () => Promise<string>): Promise<string> {
    if (key === null || !/^[\w-]{22}$/.test(key)) return apply();
    const id = `${scope}\0${key}`;
    const now = performance.now();
    for (const [other, entry] of this.#outcomes) {
      if (now - entry.at < REMEMBER_MS && this.#outcomes.size <= MAX_REMEMBERED) break;
      this.#outcomes.delete(other);
    }
    const known = this.#outcomes.get(id);
    if (known !== undefined) return known.outcome;
    const outcome = apply();
    this.#outcomes.set(id, { at: now, outcome });
    outcome.catch(() => this.#outcomes.delete(id));
    return outcome;
  }
}

/** The cookie that carries the browser's random id; the form carries an HMAC of it. */
export const CSRF_COOKIE = 'cronguard_csrf';
/** The form field of the token. */
export const CSRF_FIELD = 'csrf';

/**
 * CSRF protection without a session store: a signed double-submit. Each browser gets a random id in
 * an HttpOnly, SameSite=Strict cookie; each form carries HMAC(secret, id), which only this handler
 * can compute. A POST is accepted only when its form token matches its own cookie's id and, when
 * the browser sends an Origin, that origin is one of the dashboard's allowed hosts (never merely the
 * request's own `Host`, which a DNS-rebinding page chooses). A page on another site can neither read
 * the token nor send the cookie (SameSite), and one that plants a cookie (a sibling subdomain)
 * cannot forge its HMAC. The secret lives in memory: a restarted dashboard asks for a reload.
 */
export class CsrfProtection {
  readonly #secret = randomBytes(32);
  readonly #hosts: HostCheck;

  constructor(hosts: HostCheck) {
    this.#hosts = hosts;
  }

  /** The browser's id from its cookie, or a new one with the `Set-Cookie` header that stores it. */
  identify(req: IncomingMessage, cookiePath: string): { id: string; setCookie: string | undefined } {
    const existing = readCookie(req, CSRF_COOKIE);
    if (existing !== undefined && /^[\w-]{22}$/.test(existing)) return { id: existing, setCookie: undefined };
    const id = randomBytes(16).toString('base64url');
    // Secure when the page came over TLS (directly, or through a trusted proxy that says so).
    const tls = this.#hosts.secure(req);
    return {
      id,
      setCookie: `${CSRF_COOKIE}=${id}; Path=${cookiePath}; HttpOnly; SameSite=Strict${tls ? '; Secure' : ''}`,
    };
  }

  /** The token forms carry for this browser id. */
  token(id: string): string {
    return createHmac('sha256', this.#secret).update(id).digest('base64url');
  }

  /** True when the POST's form token belongs to its cookie and its origin (if sent) is an allowed host. */
  verify(req: IncomingMessage, formToken: string | undefined): boolean {
    const id = readCookie(req, CSRF_COOKIE);
    if (id === undefined || formToken === undefined) return false;
    const expected = Buffer.from(this.token(id));
    const given = Buffer.from(formToken);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return false;
    const origin = req.headers.origin;
    if (origin === undefined || origin === 'null') return origin === undefined;
    return this.#hosts.originAllowed(req, origin);
  }
}

function readCookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

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

/** A refusal or a miss the dashboard answers with its own status and message. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A path that is not the dashboard's: the app's `next()` when mounted connect-style, else 404. */
export function notMine(res: ServerResponse, next: ((error?: unknown) => void) | undefined): void {
  if (next !== undefined) {
    next();
    return;
  }
  throw new HttpError(404, 'No such page.');
}

/** A page, with the headers every response of the dashboard carries. */
export function send(
  res: ServerResponse,
  status: number,
  body: Html,
  nonce: string,
  headers: Record<string, string>,
  headOnly: boolean,
): void {
  const text = body.toString();
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text)),
    // Defence in depth behind the escaping: only this response's own style and script run.
    'Content-Security-Policy': `default-src 'none'; style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'X-Content-Type-Options': 'nosniff',
    // Not no-referrer: under it a browser sends `Origin: null` with the forms' POSTs, which the CSRF check refuses.
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store',
  });
  res.end(headOnly ? undefined : text);
}

/** The status of a failed request: an HttpError's own, else 500. */
export function statusOf(error: unknown): number {
  return error instanceof HttpError ? error.status : 500;
}

/**
 * The error page: the status, the guard's own words (a driver's message may name a host, a user
 * or a URL: it goes to the log, never to the page), and links under the dashboard's `base`.
 */
export function sendError(res: ServerResponse, error: unknown, base: string): void {
  const status = statusOf(error);
  const message =
    error instanceof HttpError || error instanceof GuardError
      ? error.message
      : "The dashboard could not read the database (see the server's log).";
  const nonce = randomBytes(16).toString('base64');
  const body = page(
    { base, nonce, csrfToken: undefined },
    `Error ${status}`,
    html`<h1>Error ${status}</h1>
      <p>${message}</p>
      <p><a href="${base}/">Back to the overview</a></p>`,
  );
  send(res, status, body, nonce, {}, false);
}

/**
 * The answer to a request for a host the dashboard does not answer to (DNS rebinding): 421, plain
 * text, no page, no cookie, no token; the host it named is not echoed.
 */
export function refuseHost(res: ServerResponse): void {
  const text =
    'cronguard: this dashboard does not answer to the host name this request was sent to. ' +
    'Open it by its own address, or add the name with --allow-host (CLI) or allowedHosts (guard.dashboard()).\n';
  res.writeHead(421, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text)),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  });
  res.end(text);
}
