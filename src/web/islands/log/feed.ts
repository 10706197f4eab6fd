/**
 * Live chunks into the model, in order, in slices of `SLICE_MS` (so that many chunks handed over
 * at once never make a long task); a gap before a chunk (bytes the stream skipped, which the
 * contract rules out but a proxy might cause) is read from the raw log first.
 */
import type { LogModel } from './model.ts';
import { readRange, soon, type Done } from './stream.ts';

type Item = { text: string; from: number; to: number } | { done: Done };

/** Milliseconds of stream chunks taken in at a time. */
const SLICE_MS = 8;

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
      } else if (!this.model.addLive(item.text, item.from, item.to)) {
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
