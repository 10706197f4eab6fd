/**
 * The search box's behaviour over a `Search` (search.ts): a new query searches from the top of
 * the view and goes to the first hit after it (else the first of the log); Enter and the Next
 * button go to the next hit, Shift+Enter and Previous to the one before (both wrap). The current
 * hit is kept as a position, so hits found later (earlier lines still loading, new lines
 * arriving) do not move it. The count reads "3 of 42" ("…" while the search runs, "+" past the
 * cap of kept hits).
 */
import type { LogModel } from './model.ts';
import { Search } from './search.ts';
import type { LineStore } from './store.ts';

/** A text position in the head (0) or the tail (1). */
export type Position = [number, number];

export class Finder {
  private search: Search | undefined;
  private done = true;
  private searched = -1;
  private current: Position | undefined;
  private jumpFrom: Position | undefined;
  private shown = '';
  private debounce: ReturnType<typeof setTimeout> | undefined;
  private readonly model: LogModel;
  private readonly count: HTMLElement;
  private readonly go: (line: number) => void;

  constructor(model: LogModel, count: HTMLElement, go: (line: number) => void) {
    this.model = model;
    this.count = count;
    this.go = go;
  }

  get query(): string {
    return this.search?.query ?? '';
  }

  /**
   * Wires the search box: typing searches (after a pause of 150 ms), Enter goes to the next hit
   * (Shift+Enter: the one before), Escape clears; the buttons go to the next and previous hits.
   * `from`: the position a new search starts from (the view's top).
   */
  attach(
    box: HTMLInputElement,
    prev: HTMLButtonElement,
    next: HTMLButtonElement,
    from: () => Position,
    changed: () => void,
  ): void {
    const search = () => {
      clearTimeout(this.debounce);
      this.start(box.value, from());
      changed();
    };
    box.addEventListener('input', () => {
      clearTimeout(this.debounce);
      this.debounce = setTimeout(search, 150);
    });
    box.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && box.value !== '') {
        box.value = '';
        search();
      }
      if (e.key !== 'Enter') return;
      e.preventDefault();
      if (box.value !== this.query) search();
      else this.move(e.shiftKey ? -1 : 1);
      changed();
    });
    next.addEventListener('click', () => {
      this.move(1);
      changed();
    });
    prev.addEventListener('click', () => {
      this.move(-1);
      changed();
    });
  }

  /** A new query, searched from position `from` (the view's top). */
  start(query: string, from: Position): void {
    this.search = query === '' ? undefined : new Search(query, [this.model.head, this.model.tail]);
    this.done = this.search === undefined;
    this.searched = -1;
    this.current = undefined;
    this.jumpFrom = this.search === undefined ? undefined : from;
  }

  /** Searches on for a slice; answers whether more is to do. */
  step(budgetMs: number): boolean {
    const s = this.search;
    if (s === undefined) {
      this.show('');
      return false;
    }
    if (this.searched !== this.model.version) {
      this.searched = this.model.version;
      this.done = false;
    }
    if (!this.done) this.done = s.run(budgetMs, () => performance.now());
    if (this.jumpFrom !== undefined) {
      const k = s.firstFrom(this.jumpFrom[0], this.jumpFrom[1]);
      if (k >= 0) this.goTo(k);
      else if (this.done && s.total > 0) this.goTo(0);
      if (k >= 0 || this.done) this.jumpFrom = undefined;
    }
    const k = this.current === undefined ? -1 : s.indexOf(this.current[0], this.current[1]);
    const more = this.done ? '' : '…';
    const capped = s.capped ? '+' : '';
    const total = s.total.toLocaleString('en');
    if (s.total === 0) this.show(this.done ? 'No matches' : 'Searching…');
    else if (k < 0) this.show(`${total}${capped} matches${more}`);
    else this.show(`${(k + 1).toLocaleString('en')} of ${total}${capped}${more}`);
    return !this.done;
  }

  /** The next (1) or previous (-1) hit. */
  move(delta: 1 | -1): void {
    const s = this.search;
    if (s === undefined || s.total === 0) return;
    this.jumpFrom = undefined;
    const k = this.current === undefined ? -1 : s.indexOf(this.current[0], this.current[1]);
    if (k < 0) this.goTo(delta === 1 ? 0 : s.total - 1);
    else this.goTo((k + delta + s.total) % s.total);
  }

  /** The hits on line `local` of `store` (`[column, length, …]`) and the current one's column (or -1). */
  hitsOn(store: LineStore, local: number, length: number): { hits: number[]; current: number } {
    const s = this.search;
    if (s === undefined || s.total === 0 || local >= store.count) return { hits: [], current: -1 };
    const source = store === this.model.head ? 0 : 1;
    const start = store.lineStart(local);
    const hits: number[] = [];
    let current = -1;
    for (const pos of s.within(source, start, start + length)) {
      hits.push(pos - start, s.query.length);
      if (this.current !== undefined && this.current[0] === source && this.current[1] === pos)
        current = pos - start;
    }
    return { hits, current };
  }

  private goTo(k: number): void {
    const h = this.search?.hit(k);
    if (h === undefined) return;
    this.current = h;
    const store = h[0] === 0 ? this.model.head : this.model.tail;
    this.go(this.model.global(store, store.lineAt(h[1])));
  }

  private show(text: string): void {
    if (text === this.shown) return;
    this.shown = text;
    this.count.textContent = text;
  }
}
