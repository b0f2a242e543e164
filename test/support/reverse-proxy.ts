import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeWhenTestEnds } from './case-cleanup.js';

/**
 * A reverse proxy as an operator puts in front of the dashboard (nginx's `proxy_pass` with its
 * default `Host`): it serves the paths under `prefix` (passed on as they are) from `backend`,
 * rewrites `Host` to the backend's address and says what the browser asked for in
 * X-Forwarded-Host / X-Forwarded-Proto / X-Forwarded-For. Anything else is its own 404. Returns
 * its port; closed when the test ends.
 */
export async function reverseProxy(backend: string, prefix: string): Promise<number> {
  const target = new URL(backend);
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url !== prefix && !url.startsWith(`${prefix}/`) && !url.startsWith(`${prefix}?`)) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('proxy: no route');
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    const forwarded = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: url,
        headers: {
          ...headers,
          Host: target.host,
          'X-Forwarded-Host': req.headers.host ?? '',
          'X-Forwarded-Proto': 'http',
          'X-Forwarded-For': req.socket.remoteAddress ?? '',
        },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.writeHead(502).end('proxy: backend down'));
    req.pipe(forwarded);
  });
  closeWhenTestEnds(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}
