/**
 * The rows on screen: a pool of at most `MAX_ROWS` row elements, reused as the view moves (never
 * one element per line). A row is a line number (a `#L<n>` link once the number is known), a fold
 * button on a section's header, and the text: text nodes and spans whose classes carry the ANSI
 * style (sheet.ts), with `<mark>` around search hits. Log text only ever goes in through
 * `textContent` and text nodes. A row is rebuilt only when what it shows changed.
 */
import type { StyleTable } from './ansi.ts';
import { styleClasses } from './sheet.ts';

export const MAX_ROWS = 200;
/** Characters drawn of one line (the rest is in the raw log). */
export const MAX_CHARS = 20_000;

export type RowData = {
  /** The line's name, kept while lines are added before it: `h<n>` (the head's line n) or `t<n>`. */
  id: string;
  /** The line's 1-based number, or 0 while unknown. */
  number: number;
  text: string;
  runs: number[] | null;
  /** Hits on the line: [column, length]; `current`: the column of the current hit, or -1. */
  hits: number[];
  current: number;
  /** A section header: its name and whether it is folded. */
  section?: { name: string; collapsed: boolean } | undefined;
  marked: boolean;
  /** Changes whenever the line's text changes (the open line). */
  version: number;
};

type Row = {
  el: HTMLDivElement;
  ln: HTMLAnchorElement;
  fold: HTMLButtonElement;
  text: HTMLSpanElement;
  key: string;
};

export class RowPool {
  private readonly rows: Row[] = [];
  private readonly container: HTMLElement;
  private readonly table: StyleTable;
  private readonly classes: string[] = [];
  private shown = 0;

  constructor(container: HTMLElement, table: StyleTable) {
    this.container = container;
    this.table = table;
  }

  /** The row element drawn `k`th (for focus and measures). */
  element(k: number): HTMLDivElement | undefined {
    return this.rows[k]?.el;
  }

  /** Draws `data` on the rows, in order; rows past them are hidden. */
  draw(data: readonly RowData[]): void {
    const n = Math.min(data.length, MAX_ROWS);
    while (this.rows.length < n) this.rows.push(this.make());
    for (let k = 0; k < n; k++) this.fill(this.rows[k]!, data[k]!);
    for (let k = n; k < this.shown; k++) this.rows[k]!.el.hidden = true;
    this.shown = n;
  }

  private make(): Row {
    const el = document.createElement('div');
    el.className = 'lv-row';
    const ln = document.createElement('a');
    ln.className = 'lv-ln';
    const fold = document.createElement('button');
    fold.type = 'button';
    fold.className = 'lv-fold';
    const text = document.createElement('span');
    text.className = 'lv-text';
    el.append(ln, fold, text);
    this.container.append(el);
    return { el, ln, fold, text, key: '' };
  }

  private fill(row: Row, d: RowData): void {
    row.el.hidden = false;
    const s = d.section;
    const key = `${d.id}|${d.number}|${d.version}|${d.hits.join(',')}|${d.current}|${s === undefined ? '' : s.collapsed}|${d.marked}`;
    if (key === row.key) return;
    row.key = key;
    row.el.dataset.line = d.id;
    row.el.classList.toggle('lv-marked', d.marked);
    if (d.number > 0) {
      row.ln.href = `#L${d.number}`;
      row.ln.textContent = String(d.number);
      row.ln.removeAttribute('aria-hidden');
    } else {
      row.ln.removeAttribute('href');
      row.ln.textContent = '';
      row.ln.setAttribute('aria-hidden', 'true');
    }
    row.fold.hidden = s === undefined;
    if (s !== undefined) {
      row.fold.setAttribute('aria-expanded', String(!s.collapsed));
      row.fold.setAttribute('aria-label', `Section ${s.name === '' ? 'without a name' : s.name}`);
    }
    this.text(row.text, d);
  }

  private text(el: HTMLElement, d: RowData): void {
    const text = d.text.length > MAX_CHARS ? d.text.slice(0, MAX_CHARS) : d.text;
    if (d.runs === null && d.hits.length === 0 && text === d.text) {
      el.textContent = text;
      return;
    }
    const cuts = new Set<number>([0, text.length]);
    const runs = d.runs ?? [];
    for (let i = 0; i < runs.length; i += 2) cuts.add(Math.min(runs[i]!, text.length));
    for (let i = 0; i < d.hits.length; i += 2) {
      cuts.add(Math.min(d.hits[i]!, text.length));
      cuts.add(Math.min(d.hits[i]! + d.hits[i + 1]!, text.length));
    }
    const points = [...cuts].sort((a, b) => a - b);
    const nodes: Node[] = [];
    let r = 0;
    let h = 0;
    for (let p = 0; p + 1 < points.length; p++) {
      const a = points[p]!;
      const b = points[p + 1]!;
      while (r + 2 < runs.length && runs[r + 2]! <= a) r += 2;
      while (h < d.hits.length && d.hits[h]! + d.hits[h + 1]! <= a) h += 2;
      const style = runs.length > 0 && runs[r]! <= a ? runs[r + 1]! : 0;
      const cls = this.className(style);
      let node: Node;
      if (cls === '') node = document.createTextNode(text.slice(a, b));
      else {
        const span = document.createElement('span');
        span.className = cls;
        span.textContent = text.slice(a, b);
        node = span;
      }
      if (h < d.hits.length && d.hits[h]! <= a) {
        const mark = document.createElement('mark');
        mark.className = d.hits[h] === d.current ? 'lv-hit lv-current' : 'lv-hit';
        mark.append(node);
        node = mark;
      }
      nodes.push(node);
    }
    if (text !== d.text) {
      const more = document.createElement('span');
      more.className = 'lv-more';
      more.textContent = ` … ${d.text.length - MAX_CHARS} more characters in the raw log`;
      nodes.push(more);
    }
    el.replaceChildren(...nodes);
  }

  private className(style: number): string {
    if (style === 0) return '';
    return (this.classes[style] ??= styleClasses(this.table.get(style)));
  }
}
