/**
 * The viewer's own search: a case-insensitive substring over the plain text of every line held
 * (browser find sees only the rows on screen). It runs over the stores' chunks with one regular
 * expression (V8 scans a 90 MB one-byte text in about 25 ms), in slices of a time budget so no
 * task runs long, and goes on over text added later (a live log). Hits are text positions per
 * store, in log order; at most `MAX_HITS` are kept.
 *
 * No DOM here (unit-tested under Node).
 */

/** What a search runs over (a LineStore). */
export interface Searchable {
  seal(): void;
  readonly chunkCount: number;
  chunk(k: number): string;
  chunkBase(k: number): number;
  /** The lines with characters from U+0100 on (the chunks hold `\0` in their place). */
  readonly wideCount: number;
  wideLine(k: number): number;
  wideText(k: number): string;
  lineStart(line: number): number;
}

export const MAX_HITS = 100_000;

type Part = { src: Searchable; chunk: number; at: number; wide: number; hits: Float64Array; n: number };

export function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export class Search {
  readonly query: string;
  private readonly re: RegExp;
  /** A query with wide characters can only be on the lines that have some. */
  private readonly wide: boolean;
  private readonly parts: Part[];
  /** Hits found so far. */
  total = 0;
  /** Whether MAX_HITS was reached (the search stopped there). */
  capped = false;

  constructor(query: string, sources: readonly Searchable[]) {
    this.query = query;
    this.re = new RegExp(escapeRegExp(query), 'gi');
    this.wide = /[\u0100-\uffff]/.test(query);
    this.parts = sources.map((src) => ({ src, chunk: 0, at: 0, wide: 0, hits: new Float64Array(64), n: 0 }));
  }

  /** Searches on for about `budgetMs`; answers whether all the text held now has been searched. */
  run(budgetMs: number, now: () => number): boolean {
    if (this.capped || this.query === '') return true;
    const t0 = now();
    if (this.wide) return this.runWide(budgetMs, now, t0);
    for (const p of this.parts) {
      p.src.seal();
      while (p.chunk < p.src.chunkCount) {
        const text = p.src.chunk(p.chunk);
        const base = p.src.chunkBase(p.chunk);
        this.re.lastIndex = p.at;
        let found = 0;
        for (let m = this.re.exec(text); m !== null; m = this.re.exec(text)) {
          this.add(p, base + m.index);
          if (this.capped) return true;
          // a chunk full of hits yields too
          if (++found % 4096 === 0 && now() - t0 > budgetMs) {
            p.at = this.re.lastIndex;
            return false;
          }
        }
        p.at = text.length;
        // the last chunk may still grow: stay on it
        if (p.chunk === p.src.chunkCount - 1) break;
        p.chunk++;
        p.at = 0;
        if (now() - t0 > budgetMs) return false;
      }
    }
    return true;
  }

  private runWide(budgetMs: number, now: () => number, t0: number): boolean {
    for (const p of this.parts) {
      for (; p.wide < p.src.wideCount; p.wide++) {
        const text = p.src.wideText(p.wide);
        const start = p.src.lineStart(p.src.wideLine(p.wide));
        this.re.lastIndex = 0;
        for (let m = this.re.exec(text); m !== null; m = this.re.exec(text)) {
          this.add(p, start + m.index);
          if (this.capped) return true;
        }
        if (p.wide % 256 === 0 && now() - t0 > budgetMs) {
          p.wide++;
          return false;
        }
      }
    }
    return true;
  }

  /** Hit `k` (0-based, in log order): its source's index and text position. */
  hit(k: number): [number, number] | undefined {
    for (let i = 0; i < this.parts.length; i++) {
      const p = this.parts[i]!;
      if (k < p.n) return [i, p.hits[k]!];
      k -= p.n;
    }
    return undefined;
  }

  /** The first hit found at or after position `pos` of source `source`, or -1. */
  firstFrom(source: number, pos: number): number {
    let before = 0;
    for (let i = 0; i < this.parts.length; i++) {
      const p = this.parts[i]!;
      if (i === source) {
        let lo = 0;
        let hi = p.n;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (p.hits[mid]! < pos) lo = mid + 1;
          else hi = mid;
        }
        if (lo < p.n) return before + lo;
      } else if (i > source && p.n > 0) return before;
      before += p.n;
    }
    return -1;
  }

  /** The index of the hit at position `pos` of source `source`, or -1. */
  indexOf(source: number, pos: number): number {
    const k = this.firstFrom(source, pos);
    const h = k < 0 ? undefined : this.hit(k);
    return h !== undefined && h[0] === source && h[1] === pos ? k : -1;
  }

  /** The hits of source `source` within positions [from, to): their positions. */
  within(source: number, from: number, to: number): number[] {
    const p = this.parts[source];
    if (p === undefined) return [];
    let lo = 0;
    let hi = p.n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (p.hits[mid]! < from) lo = mid + 1;
      else hi = mid;
    }
    const out: number[] = [];
    for (let k = lo; k < p.n && p.hits[k]! < to; k++) out.push(p.hits[k]!);
    return out;
  }

  private add(p: Part, pos: number): void {
    if (p.n === p.hits.length) {
      const bigger = new Float64Array(p.hits.length * 2);
      bigger.set(p.hits);
      p.hits = bigger;
    }
    p.hits[p.n++] = pos;
    if (++this.total >= MAX_HITS) this.capped = true;
  }
}
