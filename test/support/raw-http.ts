import { request } from 'node:http';

/** A response as the test reads it: status, headers, body text. */
export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/**
 * One request with exactly the headers given, `Host` included (fetch always sends the URL's own
 * host): what a page whose name re-resolves to the dashboard's address makes a browser send.
 */
export function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; form?: Record<string, string> } = {},
): Promise<RawResponse> {
  const body = options.form === undefined ? undefined : new URLSearchParams(options.form).toString();
  const headers: Record<string, string> = {
    ...(body === undefined
      ? {}
      : { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': String(Buffer.byteLength(body)) }),
    ...options.headers,
  };
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers, setHost: headers['Host'] === undefined }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The CSRF cookie a page set (`name=value`), and the hidden fields of its forms (the token, the submission key). */
export function formSecrets(response: RawResponse): { cookie: string; csrf: string; submission: string } {
  const setCookie = response.headers['set-cookie'];
  const cookie = (Array.isArray(setCookie) ? setCookie[0] : setCookie)?.split(';')[0] ?? '';
  const field = (name: string): string => new RegExp(`name="${name}" value="([^"]*)"`).exec(response.body)?.[1] ?? '';
  return { cookie, csrf: field('csrf'), submission: field('submission') };
}
