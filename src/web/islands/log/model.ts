/**
 * The log the viewer holds, as two stores: the tail, from the byte the live stream began at
 * (`start`, a line start) to the last byte received (`end`), and the head, bytes 0 to `start`
 * read in the background with Range requests. Lines are numbered head first; the tail's line
 * numbers are known once the head is complete.
 *
 * Bytes are the UTF-8 bytes of the stored log. The stream's chunks name the byte after them
 * (the event id); a chunk that overlaps what is held is trimmed, one that leaves a gap is refused
 * (the caller reads the gap first), so every byte is held exactly once.
 *
 * No DOM here (unit-tested under Node).
 */
import { StyleTable } from './ansi.ts';
import type { Marker } from './sections.ts';
import { LineStore, type Split } from './store.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class LogModel {
  readonly styles = new StyleTable();
  readonly head = new LineStore(this.styles, 'h');
  readonly tail = new LineStore(this.styles, 't');
  /** Where the tail begins; -1 before the stream began. */
  start = -1;
  /** The byte after the last one held in the tail. */
  end = 0;
  /** Bytes of the head held (from 0). */
  headBytes = 0;
  headDone = false;
  /** Whether the log is complete (the stream's `done`). */
  done = false;
  /** Bumped when lines are added (the view redraws). */
  version = 0;

  /** Lines to show. */
  get lines(): number {
    return this.head.count + this.tail.lines;
  }

  /** Bytes held. */
  get bytes(): number {
    return this.headBytes + Math.max(0, this.end - Math.max(0, this.start));
  }

  /** The first `begin` of the stream; later ones (reconnections) change nothing here. */
  begin(offset: number): void {
    if (this.start >= 0) return;
    this.start = this.end = offset;
    this.headDone = offset === 0;
  }

  /**
   * Live bytes [from, to) as text (or cut by `splitWide`): keeps what is new. Answers false, keeping nothing, when
   * bytes before `from` are missing (read `end`..`from` first).
   */
  addLive(text: string | Split, from: number, to: number): boolean {
    if (to <= this.end) return true;
    if (from > this.end) return false;
    if (from < this.end) {
      const whole = typeof text === 'string' ? text : text.pieces.join('');
      this.tail.append(decoder.decode(encoder.encode(whole).subarray(this.end - from)));
    } else if (typeof text === 'string') this.tail.append(text);
    else this.tail.appendSplit(text);
    this.end = to;
    this.version++;
    return true;
  }

  /** Head bytes up to `to` (exclusive), as text or cut by `splitWide` (or `decodeHead`). */
  addHead(text: string | Split, to: number): void {
    if (typeof text === 'string') this.head.append(text);
    else this.head.appendSplit(text);
    this.headBytes = to;
    this.version++;
  }

  finishHead(): void {
    this.head.finish();
    this.headDone = true;
    this.version++;
  }

  finish(): void {
    this.tail.finish();
    this.done = true;
    this.version++;
  }

  /** The store and line there of line `i`. */
  at(i: number): [LineStore, number] {
    return i < this.head.count ? [this.head, i] : [this.tail, i - this.head.count];
  }

  line(i: number): string {
    const [s, l] = this.at(i);
    return s.line(l);
  }

  runs(i: number): number[] | null {
    const [s, l] = this.at(i);
    return s.lineRuns(l);
  }

  /** The 1-based number of line `i` in the log, or 0 while it is not known (the head is loading). */
  number(i: number): number {
    return i < this.head.count || this.headDone ? i + 1 : 0;
  }

  /** Whether line `i` is the open (still written) line. */
  isOpen(i: number): boolean {
    return i >= this.head.count + this.tail.count;
  }

  /** Every section marker, in log order, with its line in the whole log. */
  markers(): Marker[] {
    const shift = this.head.count;
    return [...this.head.markers, ...this.tail.markers.map((m) => ({ ...m, line: m.line + shift }))];
  }

  /** The line in the whole log of line `local` of `store`. */
  global(store: LineStore, local: number): number {
    return store === this.tail ? local + this.head.count : local;
  }
}
