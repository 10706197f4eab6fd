/**
 * Where the viewer's bytes come from: its worker (worker.ts), started from this same script as a
 * module worker, or, when no worker can be had (none, or it fails to start), the same code run in
 * the page. Either way the page gets the stream's begin, its chunks and its end, and the head's
 * bytes in chunks once asked for. The worker is ended once the log is done and its head read.
 */
import { splitWide, type Split } from './store.ts';
import { LiveStream, decodeHead, readHead, type Done } from './stream.ts';
import type { FromWorker, ToWorker } from './worker.ts';

export type SourceHandlers = {
  begin(offset: number, size: number): void;
  /** A chunk of bytes [from, to), its text cut by `splitWide`. */
  chunk(split: Split, from: number, to: number): void;
  done(d: Done): void;
  /** The head's text up to byte `to`, cut by `decodeHead`; answers when it is taken in. */
  head(split: Split, to: number): Promise<void>;
  headDone(): void;
  headFailed(): void;
};

export type Source = {
  /** Reads bytes 0 to `end` (the stream's start) in the background. */
  readHead(end: number): void;
  /** Nothing more is wanted (the log is done and its head read): ends the worker. */
  close(): void;
};

export function connect(live: string, raw: string, tail: number, chunk: number, h: SourceHandlers): Source {
  const liveUrl = new URL(live, location.href).href;
  const rawUrl = new URL(raw, location.href).href;
  let head: number | undefined;
  let local: Source | undefined;
  const inPage = (): Source => {
    new LiveStream(liveUrl, tail, {
      ...h,
      chunk: (text, from, to) => h.chunk(splitWide(text), from, to),
    }).open();
    const source: Source = {
      readHead: (end) => {
        const decoder = new TextDecoder();
        readHead(rawUrl, end, chunk, (c) => h.head(decodeHead(c, decoder), c.to)).then(
          () => h.headDone(),
          () => h.headFailed(),
        );
      },
      close: () => undefined,
    };
    if (head !== undefined) source.readHead(head);
    return source;
  };
  let worker: Worker;
  try {
    worker = new Worker(new URL(import.meta.url), { type: 'module', name: 'step log' });
  } catch {
    return inPage();
  }
  const post = (m: ToWorker) => worker.postMessage(m);
  let heard = false;
  worker.addEventListener('message', (e: MessageEvent<FromWorker>) => {
    heard = true;
    const m = e.data;
    switch (m.t) {
      case 'begin':
        return h.begin(m.offset, m.size);
      case 'chunk':
        return h.chunk(m.split, m.from, m.to);
      case 'done':
        return h.done({ status: m.status, exit_code: m.exit_code, size: m.size });
      case 'head':
        return void h.head(m.split, m.to).then(() => post({ t: 'ack' }));
      case 'headDone':
        return h.headDone();
      case 'headFailed':
        return h.headFailed();
    }
  });
  worker.addEventListener('error', () => {
    if (heard || local !== undefined) return;
    worker.terminate();
    local = inPage();
  });
  post({ t: 'open', live: liveUrl, tail });
  return {
    readHead: (end) => {
      head = end;
      if (local !== undefined) local.readHead(end);
      else post({ t: 'head', raw: rawUrl, end, chunk });
    },
    close: () => worker.terminate(),
  };
}
