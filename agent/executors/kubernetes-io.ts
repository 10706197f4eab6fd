import { Writable, type Readable } from 'node:stream';
import { ApiException, type Log } from '@kubernetes/client-node';

/** Cancellation, timeouts, errors and log streams of the Kubernetes executor. */

export class Cancelled extends Error {
  constructor() {
    super('cancelled');
  }
}

export function isStatus(err: unknown, code: number): boolean {
  return err instanceof ApiException && err.code === code;
}

export function describe(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    let msg = '';
    if (typeof body === 'string') msg = body;
    else if (typeof body === 'object' && body !== null && 'message' in body) msg = String(body.message);
    return `Kubernetes API ${err.code}${msg === '' ? '' : `: ${msg}`}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Resolves after `ms`; rejects with Cancelled as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Cancelled());
    const onAbort = () => {
      clearTimeout(t);
      reject(new Cancelled());
    };
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** `p`, or Cancelled as soon as `signal` aborts (the work behind `p` is left to finish on its own). */
export function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => undefined);
    return Promise.reject(new Cancelled());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve(undefined), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/**
 * Streams a container's log into `onData`, skipping its first `cursor.seen` bytes (emitted by an
 * earlier stream) and advancing `cursor.seen` as bytes arrive, also when the stream then breaks.
 */
export async function streamLog(
  logs: Log,
  namespace: string,
  name: string,
  container: string,
  follow: boolean,
  cursor: { seen: number },
  onData: (d: Buffer) => void,
  signal: AbortSignal,
): Promise<void> {
  let pos = 0;
  let source: Readable | undefined;
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const start = pos;
      pos += chunk.length;
      if (pos > cursor.seen) {
        onData(start >= cursor.seen ? chunk : chunk.subarray(cursor.seen - start));
        cursor.seen = pos;
      }
      cb();
    },
  });
  const done = new Promise<void>((resolve, reject) => {
    sink.on('finish', resolve);
    sink.on('error', reject);
    sink.on('close', () => reject(new Error('log stream closed')));
    // Log pipes the response into `sink` and does not handle the response's errors: do it here,
    // or a broken connection would be an uncaught exception.
    sink.on('pipe', (src: Readable) => {
      source = src;
      src.on('error', (e) => sink.destroy(e));
    });
  });
  done.catch(() => undefined);
  const opening = logs.log(namespace, name, container, sink, {
    follow,
    pretty: false,
    timestamps: false,
  });
  let ctrl: AbortController;
  try {
    ctrl = await abortable(opening, signal);
  } catch (err) {
    // aborted while the stream was being opened: close it once it is open, or it stays open
    opening.then(
      (c) => c.abort(),
      () => undefined,
    );
    throw err;
  }
  const onAbort = () => {
    ctrl.abort();
    source?.destroy();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await abortable(done, signal);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
