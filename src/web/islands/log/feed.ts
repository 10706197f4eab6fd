/**
 * What the viewer receives, into the model in slices of `SLICE_MS` (so that much handed over at
 * once never makes a long task): the live chunks in order (a gap before a chunk, bytes the
 * stream skipped, which the contract rules out but a proxy might cause, is read from the raw log
 * first), and the head's chunks of bytes.
 */
import type { LogModel } from './model.ts';
import type { Split } from './store.ts';
import { readRange, soon, type Done, type HeadChunk } from './stream.ts';

type Item = { split: Split; from: number; to: number } | { done: Done };

/** Milliseconds of stream chunks taken in at a time. */
const SLICE_MS = 8;

/** Live chunks into the model, in order. */
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
      } else if (!this.model.addLive(item.split, item.from, item.to)) {
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

/** Bytes of an ASCII run decoded at a time. */
const ASCII_SLICE = 256 * 1024;

type HeadItem = { c: HeadChunk; run: number; at: number; taken: () => void } | { end: true };

/**
 * The head's chunks into the model, in slices of `SLICE_MS`: ASCII runs decoded in slices (the
 * browser's decoder makes one-byte strings of them, fast), each other line on its own.
 */
export class HeadFeed {
  private readonly queue: HeadItem[] = [];
  private planned = false;
  private readonly decoder = new TextDecoder();
  private readonly model: LogModel;
  private readonly changed: () => void;

  constructor(model: LogModel, changed: () => void) {
    this.model = model;
    this.changed = changed;
  }

  /** Queues a chunk; answers when it is taken in. */
  push(c: HeadChunk): Promise<void> {
    return new Promise((taken) => {
      this.queue.push({ c, run: 0, at: c.runs[0] ?? 0, taken });
      this.plan();
    });
  }

  /** The head is complete after the chunks queued. */
  end(): void {
    this.queue.push({ end: true });
    this.plan();
  }

  private plan(): void {
    if (this.planned) return;
    this.planned = true;
    soon(() => {
      this.planned = false;
      this.drain();
    });
  }

  private drain(): void {
    const t0 = performance.now();
    while (this.queue.length > 0 && performance.now() - t0 < SLICE_MS) {
      const item = this.queue[0]!;
      if ('end' in item) {
        this.queue.shift();
        this.model.finishHead();
        continue;
      }
      const { bytes, runs, to } = item.c;
      if (item.run >= runs.length) {
        this.model.addHead('', to);
        this.queue.shift();
        item.taken();
        continue;
      }
      const [s, e, ascii] = [runs[item.run]!, runs[item.run + 1]!, runs[item.run + 2] === 1];
      const from = Math.max(s, item.at);
      const till = ascii ? Math.min(e, from + ASCII_SLICE) : e;
      this.model.addHead(this.decoder.decode(bytes.subarray(from, till)), this.model.headBytes, !ascii);
      item.at = till;
      if (till >= e) {
        item.run += 3;
        item.at = runs[item.run] ?? 0;
      }
    }
    this.changed();
    if (this.queue.length > 0) this.plan();
  }
}
