/**
 * Getting the log's bytes: the live stream (server-sent events on `data-live`) and Range reads of
 * the raw log (`data-raw`). This runs in the viewer's worker (source.ts), or in the page when a
 * worker cannot be had.
 *
 * The stream is opened with `?tail=BYTES`: `begin` names the byte it starts at, each `log` event
 * carries a chunk of text (a JSON string) and, as its id, the byte after it; `done` ends it (the
 * stream is closed then, never reopened). A dropped stream is reopened by the browser with
 * `Last-Event-ID` (the server resumes at that byte); should the browser give up (an error answer),
 * it is reopened here with `?offset=` the last byte received.
 */
import { asciiRuns } from './bytes.ts';
import type { Split } from './store.ts';

export type Done = { status: string; exit_code: number | null; size: number };

export type LiveHandlers = {
  begin(offset: number, size: number): void;
  /** A chunk of bytes [from, to) as text. */
  chunk(text: string, from: number, to: number): void;
  done(d: Done): void;
};

/** A chunk of the head: whole lines of bytes, cut (bytes.ts) into runs [start, end, ascii, …]. */
export type HeadChunk = { bytes: Uint8Array; runs: number[]; to: number };

/** Runs `fn` in a task of its own, soon (a message to itself: no timer clamping). */
export function soon(fn: () => void): void {
  const c = new MessageChannel();
  c.port1.onmessage = () => fn();
  c.port2.postMessage(null);
}

/** Lets the browser paint and handle input (between slices of background work). */
export function yieldToBrowser(): Promise<void> {
  const s = (globalThis as { scheduler?: { yield?: () => Promise<void> } }).scheduler;
  if (s?.yield !== undefined) return s.yield();
  return new Promise((resolve) => soon(resolve));
}

/** Bytes [from, to) of the raw log. */
export async function readRange(url: string, from: number, to: number): Promise<Uint8Array> {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(url, {
        headers: { Range: `bytes=${from}-${to - 1}` },
        credentials: 'same-origin',
        cache: 'no-store',
      });
      if (res.status !== 206 && res.status !== 200) throw new Error(`raw log: ${res.status}`);
      const bytes = new Uint8Array(await res.arrayBuffer());
      // (a server that ignores Range answers the whole log)
      const part = res.status === 200 ? bytes.subarray(from, to) : bytes;
      if (part.length !== to - from) throw new Error('raw log: short read');
      return part;
    } catch (e) {
      if (attempt >= 4) throw e;
      await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
    }
  }
}

export class LiveStream {
  private source: EventSource | undefined;
  /** The byte after the last chunk on the current connection. */
  private last = 0;
  private finished = false;
  private readonly url: string;
  private readonly tail: number;
  private readonly h: LiveHandlers;

  constructor(url: string, tail: number, h: LiveHandlers) {
    this.url = url;
    this.tail = tail;
    this.h = h;
  }

  open(resume = false): void {
    const u = new URL(this.url, location.href);
    if (resume) u.searchParams.set('offset', String(this.last));
    else u.searchParams.set('tail', String(this.tail));
    const es = new EventSource(u);
    this.source = es;
    es.addEventListener('begin', (e) => {
      const d = JSON.parse((e as MessageEvent<string>).data) as { offset: number; size: number };
      this.last = d.offset;
      this.h.begin(d.offset, d.size);
    });
    es.addEventListener('log', (e) => {
      const m = e as MessageEvent<string>;
      const to = Number(m.lastEventId);
      this.h.chunk(JSON.parse(m.data) as string, this.last, to);
      this.last = to;
    });
    es.addEventListener('done', (e) => {
      this.finished = true;
      es.close();
      this.h.done(JSON.parse((e as MessageEvent<string>).data) as Done);
    });
    es.addEventListener('error', () => {
      // CONNECTING: the browser retries with Last-Event-ID; CLOSED: it gave up, so do it here
      if (this.finished || es.readyState !== EventSource.CLOSED) return;
      setTimeout(() => {
        if (!this.finished && this.source === es) this.open(true);
      }, 3000);
    });
  }

  close(): void {
    this.finished = true;
    this.source?.close();
  }
}

/**
 * Reads the head of the log (bytes 0 to `end`, a line start) in Range reads of `chunk` bytes, the
 * next one fetched while the last is handed on: whole lines (the rest goes with the next chunk,
 * so no character is cut), with their ASCII runs found (bytes.ts). `emit` may wait (the page
 * taking them in).
 */
export async function readHead(
  raw: string,
  end: number,
  chunk: number,
  emit: (c: HeadChunk) => Promise<void>,
): Promise<void> {
  let carry: Uint8Array | undefined;
  let next = end > 0 ? readRange(raw, 0, Math.min(end, chunk)) : undefined;
  for (let a = 0; a < end;) {
    const b = Math.min(end, a + chunk);
    let bytes = await next!;
    next = b < end ? readRange(raw, b, Math.min(end, b + chunk)) : undefined;
    if (carry !== undefined) {
      const joined = new Uint8Array(carry.length + bytes.length);
      joined.set(carry);
      joined.set(bytes, carry.length);
      bytes = joined;
    }
    const cut = b === end ? bytes.length : bytes.lastIndexOf(10) + 1;
    carry = cut < bytes.length ? bytes.slice(cut) : undefined;
    const body = bytes.subarray(0, cut);
    await emit({
      bytes: body,
      runs: asciiRuns(body).flatMap(([s, e, ascii]) => [s, e, ascii ? 1 : 0]),
      to: b,
    });
    a = b;
  }
}

/** Characters of an ASCII run in one piece (the page takes in a piece at a time). */
const PIECE = 256 * 1024;

/**
 * A head chunk's text: ASCII runs decoded in pieces (the browser's decoder makes one-byte strings
 * of them, very fast), each line with other bytes decoded on its own and marked wide (it is filed
 * apart, or copied narrow when all its characters are below U+0100).
 */
export function decodeHead(c: HeadChunk, decoder = new TextDecoder()): Split {
  const out: Split = { pieces: [], wide: [] };
  for (let r = 0; r < c.runs.length; r += 3) {
    const [s, e, ascii] = [c.runs[r]!, c.runs[r + 1]!, c.runs[r + 2] === 1];
    for (let x = s; x < e; x = ascii ? x + PIECE : e) {
      out.pieces.push(decoder.decode(c.bytes.subarray(x, ascii ? Math.min(e, x + PIECE) : e)));
      out.wide.push(!ascii);
    }
  }
  return out;
}
