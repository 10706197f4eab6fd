import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { TLSSocket } from 'node:tls';
import type { Request, Response } from 'express';
import { drained } from '../vcs/process/stream.ts';

/** A streamed 200 (`reply.stream`): headers, body, and maybe a producer that writes the body to the connection itself. */
export type StreamReply = {
  headers: Record<string, string>;
  body: AsyncIterable<Uint8Array>;
  handOff: (() => Promise<void>) | undefined;
  /** 200 unless given (206 for a byte range). */
  status?: number;
};

/**
 * Sends a streamed 200 (or `status`): the headers only for a HEAD (the producer stopped unread); the body
 * written by the producer itself when it can (`handOff`, the headers flushed and nothing queued);
 * else relayed with backpressure, a client that goes away stopping the reading.
 */
export async function sendStream(req: Request, res: Response, out: StreamReply): Promise<void> {
  res.status(out.status ?? 200);
  for (const [k, v] of Object.entries(out.headers)) res.setHeader(k, v);
  if (req.method === 'HEAD') {
    // The headers only: the process that would produce the body is stopped unread.
    await out.body[Symbol.asyncIterator]().return?.();
    res.end();
    return;
  }
  if (out.handOff !== undefined && (await headersFlushed(res))) {
    await handOver(res, out.handOff);
    return;
  }
  // Backpressure, and a client that goes away stops the reading (the source is closed).
  await pipeline(Readable.from(out.body), res).catch((err: unknown) => {
    if ((err as { code?: unknown }).code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err;
  });
}

/**
 * The connection of `req` if a response body may be written to it by another process: a plain
 * TCP socket (a TLS socket's bytes must pass through Node's encryption) carrying HTTP/1.x (HTTP/2
 * frames its data).
 */
export function handOffSocket(req: Request): Socket | undefined {
  const socket = req.socket as Socket | undefined;
  if (socket === undefined || socket instanceof TLSSocket || req.httpVersionMajor !== 1) return undefined;
  if (req.method !== 'GET') return undefined; // a HEAD has no body to write
  return socket;
}

/** Sends the headers and waits until they left Node: true when nothing else is queued. */
async function headersFlushed(res: Response): Promise<boolean> {
  const socket = res.socket;
  if (socket === null || socket.destroyed) return false;
  res.flushHeaders();
  await drained(socket);
  return !socket.destroyed && socket.writableLength === 0 && res.socket === socket;
}

/**
 * Lets the producer write the body straight to the connection, then ends the response (its
 * Content-Length met, the connection kept alive; closed instead when the response says
 * `Connection: close`, as one whose producer left the connection blocking does). A producer that fails (or a client gone) leaves
 * the response short: the connection is destroyed, never reused; the failure is thrown on unless
 * the client had gone.
 */
async function handOver(res: Response, handOff: () => Promise<void>): Promise<void> {
  const socket = res.socket;
  // The producer writes in small pieces (git: 16 KiB): with Nagle's algorithm the kernel joins
  // them into full segments while earlier ones are unacknowledged, instead of sending and waking
  // the client for each; turning it off again at the end sends what is left at once.
  socket?.setNoDelay(false);
  try {
    await handOff();
  } catch (err) {
    const gone = socket === null || socket.destroyed;
    socket?.destroy();
    if (gone) return;
    throw err;
  }
  if (!socket?.destroyed) socket?.setNoDelay(true);
  if (res.getHeader('Connection') === 'close') {
    // The producer left the connection blocking (`OpenedFile.closes`): closed, never read again.
    res.end(() => socket?.destroy());
    return;
  }
  res.end();
}
