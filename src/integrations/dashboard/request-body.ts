import type { IncomingMessage } from 'node:http';

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
