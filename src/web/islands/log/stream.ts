/**
 * Getting the log's bytes: the live stream (server-sent events on `data-live`) and Range reads of
 * the raw log (`data-raw`).
 *
 * The stream is opened with `?tail=BYTES`: `begin` names the byte it starts at, each `log` event
 * carries a chunk of text (a JSON string) and, as its id, the byte after it; `done` ends it (the
 * stream is closed then, never reopened). A dropped stream is reopened by the browser with
 * `Last-Event-ID` (the server resumes at that byte); should the browser give up (an error answer),
 * the viewer reopens it itself with `?offset=` its last byte. `Feed` puts the chunks into the
 * model in order, reading a gap with a Range request first if one ever shows.
 */
import type { LogModel } from './model.ts';

export type Done = { status: string; exit_code: number | null; size: number };

export type LiveHandlers = {
  begin(offset: number, size: number): void;
  /** A chunk of bytes [from, to): `json` is its text as a JSON string (parsed later, in slices). */
  chunk(json: string, from: number, to: number): void;
  done(d: Done): void;
};

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
  private readonly resumeAt: () => number;

  constructor(url: string, tail: number, h: LiveHandlers, resumeAt: () => number) {
    this.url = url;
    this.tail = tail;
    this.h = h;
    this.resumeAt = resumeAt;
  }

  open(resume = false): void {
    const u = new URL(this.url, location.href);
    if (resume) u.searchParams.set('offset', String(this.resumeAt()));
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
      this.h.chunk(m.data, this.last, to);
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

type Item = { json: string; from: number; to: number } | { done: Done };

/** Milliseconds of stream chunks taken in at a time. */
const SLICE_MS = 8;

/**
 * Live chunks into the model, in order, in slices of `SLICE_MS` (the browser may hand over many
 * events in one task: they are only queued there); a gap before a chunk is read from the raw log
 * first.
 */
export class Feed {
  private readonly queue: Item[] = [];
  private head = 0;
  private busy = false;
  private planned = false;
  private readonly model: LogModel;
  private readonly raw: string;
  private readonly changed: () => void;
  private readonly finished: (d: Done) => void;

  constructor(model: LogModel, raw: string, changed: () => void, finished: (d: Done) => void) {
    this.model = model;
    this.raw = raw;
    this.changed = changed;
    this.finished = finished;
  }

  push(item: Item): void {
    this.queue.push(item);
    this.plan();
  }

  private plan(): void {
    if (this.planned || this.busy) return;
    this.planned = true;
    soon(() => {
      this.planned = false;
      this.drain();
    });
  }

  private drain(): void {
    const t0 = performance.now();
    let added = false;
    while (this.head < this.queue.length && performance.now() - t0 < SLICE_MS) {
      const item = this.queue[this.head]!;
      if ('done' in item) {
        this.model.finish();
        this.finished(item.done);
      } else if (!this.model.addLive(JSON.parse(item.json) as string, item.from, item.to)) {
        this.fill(item.from);
        break;
      }
      this.queue[this.head++] = undefined as never;
      added = true;
    }
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    if (added) this.changed();
    if (this.head < this.queue.length) this.plan();
  }

  /** Reads the bytes missing before `to`, then goes on. */
  private fill(to: number): void {
    this.busy = true;
    const from = this.model.end;
    readRange(this.raw, from, to)
      .then((bytes) => this.model.addLive(new TextDecoder().decode(bytes), from, to))
      .catch(() => undefined)
      .finally(() => {
        this.busy = false;
        this.plan();
      });
  }
}

/**
 * Reads the head (bytes 0 to the stream's start) in chunks of `chunk` bytes, the next one
 * fetched while the last is added, in slices with a yield between them.
 */
export async function loadHead(
  model: LogModel,
  raw: string,
  chunk: number,
  changed: () => void,
): Promise<void> {
  const end = model.start;
  const decoder = new TextDecoder();
  const SLICE = 256 * 1024;
  let next = end > 0 ? readRange(raw, 0, Math.min(end, chunk)) : undefined;
  for (let a = 0; a < end;) {
    const b = Math.min(end, a + chunk);
    const bytes = await next!;
    next = b < end ? readRange(raw, b, Math.min(end, b + chunk)) : undefined;
    const text = decoder.decode(bytes, { stream: true });
    for (let i = 0; i < text.length; i += SLICE) {
      const last = i + SLICE >= text.length;
      model.addHead(text.slice(i, i + SLICE), last ? b : model.headBytes);
      changed();
      await yieldToBrowser();
    }
    a = b;
  }
  model.addHead(decoder.decode(), end);
  model.finishHead();
  changed();
}
