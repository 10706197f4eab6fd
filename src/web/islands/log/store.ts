/**
 * An append-only store of log lines, made plain as they arrive (see ansi.ts): the plain text of
 * every complete line, each followed by `\n`, in a few large strings ("chunks"), with the start of
 * each line in a growable Float64Array, the style runs of the lines that have any in one growable
 * Uint32Array, and the section markers met (sections.ts). A line without a newline yet (the live
 * end of the log) is kept raw and made plain when shown.
 *
 * Memory: V8 keeps a string whose characters are all below U+0100 in one byte per character, any
 * other in two, and one wide character (a `✓`, an emoji) in a chunk would double the whole
 * chunk. So the chunks hold only narrow text: a line with wide characters has each UTF-16 unit
 * of them replaced by `\0` there (the columns stay those of the line, and a search for narrow
 * text still finds its narrow parts), and its real text is kept beside, with its line number.
 * Narrow text cut from a wide string is copied into a one-byte string (a JSON round trip: the one
 * copy V8 makes narrow again, at about 250 MB/s).
 *
 * Text comes in blocks of any size. A narrow block free of control characters and markers,
 * arriving in the default style, is stored as it is, the lines only found by `indexOf('\n')`;
 * other blocks go line by line. Pieces wait (readable) until they make `CHUNK` characters, then
 * are joined into one chunk: chunks of that size live in V8's large-object space, which its
 * garbage collector never copies, and a chunk is never changed once made.
 *
 * No DOM here (unit-tested under Node).
 */
import { parseLine, type Plain, type StyleTable } from './ansi.ts';
import { detectMarker, type Marker } from './sections.ts';

/** Characters of a chunk (at least: pieces are whole lines). */
const CHUNK = 256 * 1024;
const WIDE = /[\u0100-\uffff]/;
const WIDE_ALL = /[\u0100-\uffff]/g;
const WIDE_EACH = /[\u0100-\uffff]/g;

/** `s` in V8's one-byte representation (its characters must all be below U+0100). */
export function narrow(s: string): string {
  return JSON.parse(JSON.stringify(s)) as string;
}

/** The last index of the ascending `at` whose value is at most `pos`. */
function before(at: readonly number[], pos: number): number {
  let lo = 0;
  let hi = at.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (at[mid]! <= pos) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** Control characters but tab, newline, carriage return and escape (rare: one regular expression scan). */
// eslint-disable-next-line no-control-regex
const OTHER_CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]/g;
const MARKS = ['\x1b', '\r', '::group::', '::endgroup::', 'section_'];

/** Where the next character or marker needing a line's slow path is, from a position on (scans once). */
class Special {
  private readonly text: string;
  private readonly next = [-1, -1, -1, -1, -1, -1];

  constructor(text: string) {
    this.text = text;
  }

  from(at: number): number {
    let min = Infinity;
    for (let k = 0; k < 6; k++) {
      if (this.next[k]! < at) {
        if (k === 5) {
          OTHER_CONTROL.lastIndex = at;
          this.next[5] = OTHER_CONTROL.exec(this.text)?.index ?? Infinity;
        } else {
          const i = this.text.indexOf(MARKS[k]!, at);
          this.next[k] = i < 0 ? Infinity : i;
        }
      }
      min = Math.min(min, this.next[k]!);
    }
    return min;
  }
}

/** Raw text cut into narrow runs of lines (in one-byte form) and, alone, each line with wide characters. */
export type Split = { pieces: string[]; wide: boolean[] };

export function splitWide(text: string): Split {
  WIDE_ALL.lastIndex = 0;
  let m = WIDE_ALL.exec(text);
  if (m === null) return { pieces: [text], wide: [false] };
  const out: Split = { pieces: [], wide: [] };
  const put = (piece: string, wide: boolean) => {
    out.pieces.push(piece);
    out.wide.push(wide);
  };
  let from = 0;
  while (m !== null) {
    const start = text.lastIndexOf('\n', m.index) + 1;
    const nl = text.indexOf('\n', m.index);
    const end = nl < 0 ? text.length : nl + 1;
    if (start > from) put(narrow(text.slice(from, start)), false);
    put(text.slice(start, end), true);
    from = WIDE_ALL.lastIndex = end;
    m = WIDE_ALL.exec(text);
  }
  if (from < text.length) put(narrow(text.slice(from)), false);
  return out;
}

function grow<T extends Float64Array | Int32Array | Uint32Array>(a: T, need: number): T {
  if (need <= a.length) return a;
  let n = a.length * 2;
  while (n < need) n *= 2;
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a);
  return b;
}

export class LineStore {
  /** Sealed text and the position of each chunk's first character in the whole text. */
  private readonly chunks: string[] = [];
  private readonly bases: number[] = [];
  /** Pieces not in a chunk yet (whole lines), and where each starts. */
  private pending: string[] = [];
  private pendingAt: number[] = [];
  private sealedLength = 0;
  /** Characters stored (sealed and pending). */
  private length = 0;
  /** Start of each complete line in the text. */
  private starts = new Float64Array(1024);
  /** Per line: where its runs are in `runs` ([n, col, style, …]), or -1. */
  private styleAt = new Int32Array(1024);
  private runs = new Uint32Array(4096);
  private runsLength = 0;
  /** The lines with wide characters (ascending) and their real text. */
  private readonly wideLines: number[] = [];
  private readonly wideTexts: string[] = [];
  /** Complete lines. */
  count = 0;
  /** The line being written (no newline yet), raw, whether it has wide characters, its style at the start. */
  private open = '';
  private openWide = false;
  private openPlain: Plain | undefined;
  private style = 0;
  readonly markers: Marker[] = [];
  /** Bumped when the open line changes (to redraw it). */
  openVersion = 0;
  private readonly table: StyleTable;
  /** Prefix of the markers' keys. */
  private readonly name: string;

  constructor(table: StyleTable, name: string) {
    this.table = table;
    this.name = name;
  }

  /**
   * Adds raw text; answers how many lines it completed. `copy`: the text may be held in two
   * bytes per character though all of them are narrow (copy it narrow).
   */
  append(text: string, copy = false): number {
    if (!copy || WIDE.test(text)) return this.appendSplit(splitWide(text));
    return this.appendSplit({ pieces: [narrow(text)], wide: [false] });
  }

  /** Adds raw text already cut by `splitWide` (in a worker, say). */
  appendSplit(split: Split): number {
    const before = this.count;
    split.pieces.forEach((piece, i) => this.feed(piece, split.wide[i] === true));
    return this.count - before;
  }

  /** Ends the open line (the log is complete). */
  finish(): void {
    if (this.open !== '') this.commitLine(this.open, this.openWide);
    this.setOpen('', false);
  }

  /** Lines to show: the complete ones and the open one. */
  get lines(): number {
    return this.count + (this.open === '' ? 0 : 1);
  }

  /** The plain text of line `i` (`i === count`: the open line). */
  line(i: number): string {
    if (i >= this.count) return this.openLine().text;
    const w = this.wideIndex(i);
    if (w >= 0) return this.wideTexts[w]!;
    const start = this.starts[i]!;
    const end = (i + 1 < this.count ? this.starts[i + 1]! : this.length) - 1;
    const [texts, at] =
      start >= this.sealedLength ? [this.pending, this.pendingAt] : [this.chunks, this.bases];
    const k = before(at, start);
    return texts[k]!.slice(start - at[k]!, end - at[k]!);
  }

  /** The style runs of line `i` (`[col, style, …]`), or null. */
  lineRuns(i: number): number[] | null {
    if (i >= this.count) return this.openLine().runs;
    const at = this.styleAt[i]!;
    if (at < 0) return null;
    const n = this.runs[at]!;
    return Array.from(this.runs.subarray(at + 1, at + 1 + 2 * n));
  }

  /** The line holding text position `pos` (a search hit). */
  lineAt(pos: number): number {
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.starts[mid]! <= pos) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }

  lineStart(i: number): number {
    return this.starts[i]!;
  }

  /** Makes the pending text a chunk (searchable). */
  seal(): void {
    if (this.pending.length === 0) return;
    const text = this.pending.join('');
    this.pending = [];
    this.pendingAt = [];
    this.chunks.push(text);
    this.bases.push(this.sealedLength);
    this.sealedLength += text.length;
  }

  /** The sealed chunks, for the search (seal first). */
  get chunkCount(): number {
    return this.chunks.length;
  }

  chunk(k: number): string {
    return this.chunks[k]!;
  }

  chunkBase(k: number): number {
    return this.bases[k]!;
  }

  /** The lines with wide characters, for a search for wide text. */
  get wideCount(): number {
    return this.wideLines.length;
  }

  wideLine(k: number): number {
    return this.wideLines[k]!;
  }

  wideText(k: number): string {
    return this.wideTexts[k]!;
  }

  private wideIndex(i: number): number {
    const w = this.wideLines;
    if (w.length === 0 || i < w[0]! || i > w[w.length - 1]!) return -1;
    let lo = 0;
    let hi = w.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (w[mid]! < i) lo = mid + 1;
      else hi = mid;
    }
    return w[lo] === i ? lo : -1;
  }

  private openLine(): Plain {
    return (this.openPlain ??= parseLine(this.open, this.style, this.table));
  }

  private setOpen(raw: string, wide: boolean): void {
    this.openWide = raw !== '' && wide;
    if (raw === this.open) return;
    this.open = raw;
    this.openPlain = undefined;
    this.openVersion++;
  }

  /** Raw text, narrow (in one-byte form) or not. */
  private feed(text: string, wide: boolean): void {
    const first = text.indexOf('\n');
    if (first < 0) {
      if (text !== '') this.setOpen(this.open + text, this.openWide || wide);
      return;
    }
    let from = 0;
    if (this.open !== '') {
      this.commitLine(this.open + text.slice(0, first), this.openWide || wide);
      from = first + 1;
    }
    const last = text.lastIndexOf('\n');
    if (last >= from) {
      if (!wide) this.commitLines(text, from, last + 1);
      else
        for (
          let at = from, nl = text.indexOf('\n', from);
          nl >= 0 && nl <= last;
          nl = text.indexOf('\n', at)
        ) {
          this.commitLine(text.slice(at, nl), true);
          at = nl + 1;
        }
    }
    this.setOpen(text.slice(last + 1), wide);
  }

  /**
   * The complete narrow lines text[from, end): runs of plain lines (no control character, no
   * marker, in the default style) as blocks, the others one by one.
   */
  private commitLines(text: string, from: number, end: number): void {
    const special = new Special(text);
    for (let at = from; at < end;) {
      if (this.style === 0) {
        const sp = Math.min(special.from(at), end);
        const start = sp >= end ? end : text.lastIndexOf('\n', sp - 1) + 1;
        if (start > at) {
          this.commitBlock(at === 0 && start === text.length ? text : text.slice(at, start));
          at = start;
          if (at >= end) break;
        }
      }
      const nl = text.indexOf('\n', at);
      this.commitLine(text.slice(at, nl), false);
      at = nl + 1;
    }
  }

  /** Complete narrow lines in the default style, without control characters (`block` ends with `\n`). */
  private commitBlock(block: string): void {
    const pos = this.length;
    for (let nl = block.indexOf('\n'), from = 0; nl >= 0; nl = block.indexOf('\n', from)) {
      this.reserve();
      this.starts[this.count] = pos + from;
      this.styleAt[this.count++] = -1;
      from = nl + 1;
    }
    this.add(block);
  }

  private commitLine(raw: string, wide: boolean): void {
    const p = parseLine(raw, this.style, this.table);
    this.style = p.end;
    this.reserve();
    const marker = raw.includes('::') || raw.includes('section_') ? detectMarker(raw, p.text) : undefined;
    if (marker !== undefined)
      this.markers.push({ ...marker, key: `${this.name}${this.count}`, line: this.count });
    this.starts[this.count] = this.length;
    if (p.runs === null) this.styleAt[this.count] = -1;
    else {
      this.runs = grow(this.runs, this.runsLength + 1 + p.runs.length);
      this.styleAt[this.count] = this.runsLength;
      this.runs[this.runsLength] = p.runs.length / 2;
      this.runs.set(p.runs, this.runsLength + 1);
      this.runsLength += 1 + p.runs.length;
    }
    let text = p.text;
    if (wide && WIDE.test(text)) {
      this.wideLines.push(this.count);
      // (a copy: the text may be a slice keeping a whole stream chunk alive)
      this.wideTexts.push(JSON.parse(JSON.stringify(text)) as string);
      text = narrow(text.replace(WIDE_EACH, '\0'));
    } else if (wide) text = narrow(text);
    this.count++;
    // (one piece: joining a line and its newline apart is four times slower)
    this.add(`${text}\n`);
  }

  private add(piece: string): void {
    this.pending.push(piece);
    this.pendingAt.push(this.length);
    this.length += piece.length;
    if (this.length - this.sealedLength >= CHUNK) this.seal();
  }

  private reserve(): void {
    this.starts = grow(this.starts, this.count + 1);
    this.styleAt = grow(this.styleAt, this.count + 1);
  }
}
