import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { HostCheck } from './allowed-hosts.js';

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
