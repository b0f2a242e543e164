import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { GuardError } from '../../core/errors.js';
import { html, type Html } from './html.js';
import { page } from './layout.js';

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
