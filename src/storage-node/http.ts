/** The small HTTP pieces of a storage node's internal port (server.ts). */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CgiResult } from '../vcs/process/cgi.ts';
import type { Logger } from 'pino';
import { BACKEND } from '../vcs/remote/wire.ts';

/** A request the node refuses itself, with its status. */
export class Refused extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.headers = headers;
  }
}

const MAX_CALL_BYTES = 32 * 1024 * 1024;

/** Ends a backend run's answer: a backend that failed before its header block is a 502 the server reads. */
export function finish(res: ServerResponse, result: CgiResult): void {
  if (result.outcome === 'ok') {
    res.end();
    return;
  }
  if (res.headersSent || result.outcome === 'aborted') {
    res.destroy();
    return;
  }
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', [BACKEND.outcome]: 'failed' });
  res.end(result.stderr);
}

export function signalOf(res: ServerResponse): AbortSignal {
  const ac = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) ac.abort(new Error('server left'));
  });
  return ac.signal;
}

export function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

export async function exists(p: string): Promise<boolean> {
  return fs.stat(p).then(
    () => true,
    () => false,
  );
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_CALL_BYTES) throw new Refused(413, 'call too large');
    parts.push(c as Buffer);
  }
  return Buffer.concat(parts).toString('utf8');
}

export function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
}

export function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    ...headers,
  });
  res.end(data);
}

/** Answers a failed request: a refusal with its status, malformed JSON 400, anything else 500 (logged). */
export function fail(res: ServerResponse, e: unknown, log: Logger): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (e instanceof Refused) {
    json(res, e.status, { error: { code: 'refused', message: e.message } }, e.headers);
    return;
  }
  if (e instanceof SyntaxError) {
    json(res, 400, { error: { code: 'bad_request', message: 'malformed JSON' } });
    return;
  }
  log.error({ err: e }, 'storage node request failed');
  json(res, 500, { error: { code: 'internal', message: e instanceof Error ? e.message : 'failed' } });
}
