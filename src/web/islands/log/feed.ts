/**
 * What the viewer receives, into the model in slices of `SLICE_MS` (so that much handed over at
 * once never makes a long task): the live chunks in order (a gap before a chunk, bytes the
 * stream skipped, which the contract rules out but a proxy might cause, is read from the raw log
 * first), and the head's chunks of bytes.
 */
import type { LogModel } from './model.ts';
import type { Split } from './store.ts';
import { readRange, soon, type Done } from './stream.ts';

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

type HeadItem = { split: Split; next: number; to: number; taken: () => void } | { end: true };

/** The head's pieces (see `decodeHead`) into the model, in slices of `SLICE_MS`. */
export class HeadFeed {
  private readonly queue: HeadItem[] = [];
  private planned = false;
  private readonly model: LogModel;
  private readonly changed: () => void;

  constructor(model: LogModel, changed: () => void) {
    this.model = model;
    this.changed = changed;
  }

  /** Queues the pieces of the head up to byte `to`; answers when they are taken in. */
  push(split: Split, to: number): Promise<void> {
    return new Promise((taken) => {
      this.queue.push({ split, next: 0, to, taken });
      this.plan();
    });
  }

  /** The head is complete after the pieces queued. */
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
      } else if (item.next >= item.split.pieces.length) {
        this.model.addHead({ pieces: [], wide: [] }, item.to);
        this.queue.shift();
        item.taken();
      } else {
        const k = item.next++;
        const piece = { pieces: [item.split.pieces[k]!], wide: [item.split.wide[k]!] };
        this.model.addHead(piece, this.model.headBytes);
      }
    }
    this.changed();
    if (this.queue.length > 0) this.plan();
  }
}
