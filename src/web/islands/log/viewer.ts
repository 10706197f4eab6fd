/**
 * The step log viewer: the model (model.ts) fed by the live stream and the background reads of
 * earlier bytes (stream.ts), drawn on a pool of rows (render.ts) at each animation frame through
 * the scroll mapping (scroll.ts), with sections (sections.ts), search (find.ts), follow mode,
 * `#L<n>` links and throttled announcements.
 *
 * The view's position is kept as a line and a pixel offset into it (`anchor`), so lines added
 * before it (the head loading) or sections folded above it do not move what the reader sees.
 * Following, the position is the end.
 */
import { Finder, type Position } from './find.ts';
import { LogModel } from './model.ts';
import { MAX_ROWS, RowPool, type RowData } from './render.ts';
import * as S from './scroll.ts';
import { Folds, RowMap, buildSections, hiddenRanges, sectionsHiding, type Section } from './sections.ts';
import { Geometry } from './sheet.ts';
import { Feed, HeadFeed } from './feed.ts';
import { connect, type Source } from './source.ts';
import type { Done } from './stream.ts';
import { Teller } from './status.ts';
import { buildUi, type Ui } from './ui.ts';

/** Bytes of the log the stream starts with; the rest is read in the background. */
const TAIL = 256 * 1024;
/** Bytes per background Range read. */
const CHUNK = 4 * 1024 * 1024;

let viewers = 0;

/** A line held: in the tail or the head, and its line there. */
type Ref = { tail: boolean; local: number };

export function mountViewer(root: HTMLElement): void {
  const live = root.dataset.live;
  const raw = root.dataset.raw;
  if (live === undefined || raw === undefined) return;
  new Viewer(root, live, raw);
}

class Viewer {
  private readonly model = new LogModel();
  private readonly root: HTMLElement;
  private readonly ui: Ui;
  private readonly pool: RowPool;
  private readonly geometry: Geometry;
  private readonly finder: Finder;
  private readonly feed: Feed;
  private readonly headFeed: HeadFeed;
  private readonly source: Source;
  private readonly folds = new Folds();
  private sections: Section[] = [];
  private headers = new Map<number, Section>();
  private map = new RowMap(0, []);
  private sectionsKey = '';
  private foldsChanged = true;
  private rowHeight = 20;
  private viewport = 0;
  private following = true;
  private anchor: Ref & { offset: number } = { tail: false, local: 0, offset: 0 };
  private top = 0;
  private lastSet = 0;
  private scheduled = false;
  private marked: Ref | undefined;
  private pendingLine = 0;
  private readonly teller: Teller;
  /** Whether the head is to be read (once the first lines of the tail are drawn). */
  private headWanted = false;
  private beganAt = 0;
  private closed = false;

  constructor(root: HTMLElement, live: string, raw: string) {
    this.root = root;
    performance.mark('log-viewer:start');
    this.ui = buildUi(root, raw, ++viewers);
    this.teller = new Teller(
      this.model,
      this.ui.state,
      this.ui.announce,
      root.dataset.status ?? 'running',
      () => this.schedule(),
    );
    this.pool = new RowPool(this.ui.rows, this.model.styles);
    this.geometry = new Geometry(viewers);
    this.finder = new Finder(this.model, this.ui.count, (line) => this.goToLine(line));
    this.feed = new Feed(
      this.model,
      raw,
      () => this.schedule(),
      (d) => this.finished(d),
    );
    this.headFeed = new HeadFeed(this.model, () => this.schedule());
    this.source = connect(live, raw, TAIL, CHUNK, {
      begin: (offset) => this.begin(offset),
      chunk: (split, from, to) => this.feed.push({ split, from, to }),
      done: (done) => this.feed.push({ done }),
      head: (split, to) => this.headFeed.push(split, to),
      headDone: () => this.headFeed.end(),
      headFailed: () => this.teller.say('The earlier lines could not be loaded; the raw log has them all.'),
    });
    this.pendingLine = this.hashLine();
    if (this.pendingLine > 0) this.following = false;
    this.listen();
    this.ui.scroller.setAttribute('aria-busy', 'true');
    new ResizeObserver(() => {
      this.viewport = this.ui.scroller.clientHeight;
      this.schedule();
    }).observe(this.ui.scroller);
    this.viewport = this.ui.scroller.clientHeight;
    this.schedule();
  }

  private begin(offset: number): void {
    if (this.model.start >= 0) return;
    performance.mark('log-viewer:begin');
    this.model.begin(offset);
    this.headWanted = offset > 0;
    this.beganAt = performance.now();
  }

  /**
   * Starts reading the head once the tail the stream began with is on screen (it comes first),
   * or the tail stays empty for a while (its last line has no end yet).
   */
  private startHead(): void {
    if (!this.headWanted) return;
    if (this.model.lines === 0 && !this.model.done && performance.now() - this.beganAt < 300) {
      setTimeout(() => this.schedule(), 100);
      return;
    }
    this.headWanted = false;
    this.source.readHead(this.model.start);
  }

  private finished(d: Done): void {
    this.root.dataset.status = d.status;
    this.teller.finished(d.status, d.exit_code);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.frame());
  }

  private geom(): S.Geometry {
    return { rows: this.map.rows, rowHeight: this.rowHeight, viewport: this.viewport };
  }

  /** A scroll the viewer did not make (also looked for at each frame: its event may come after). */
  private scrolled(): void {
    const st = this.ui.scroller.scrollTop;
    if (Math.abs(st - this.lastSet) < 1) return;
    const g = this.geom();
    this.lastSet = st;
    this.userMove(S.scaled(g) ? S.fromScroll(g, st) : st);
  }

  private frame(): void {
    this.scheduled = false;
    this.updateMap();
    this.scrolled();
    if (this.pendingLine > 0) this.tryHash();
    const searching = this.finder.step(8);
    this.updateMap();
    const g = this.geom();
    // (the anchor stays as it was set even when clamped: a line centred before the lines after it
    // are in becomes centred as they come)
    this.top = S.clampTop(g, this.following ? S.maxTop(g) : this.anchorTop());
    this.draw(g);
    const scroller = this.ui.scroller;
    // (set only when it differs: setting it would end a smooth scroll under way)
    const st = S.toScroll(g, this.top);
    if (Math.abs(scroller.scrollTop - st) >= 1) scroller.scrollTop = st;
    this.lastSet = scroller.scrollTop;
    this.measure();
    this.geometry.widen(this.ui.rows.scrollWidth);
    this.ui.follow.setAttribute('aria-pressed', String(this.following));
    this.ui.scroller.setAttribute('aria-busy', String(!this.model.headDone));
    this.teller.tell();
    this.startHead();
    if (!this.closed && this.model.done && this.model.headDone) {
      this.closed = true;
      this.source.close();
    }
    if (searching) this.schedule();
  }

  private draw(g: S.Geometry): void {
    const w = S.visibleRows(g, this.top);
    const m = this.model;
    const data: RowData[] = [];
    for (let r = w.first; r < w.first + Math.min(w.count, MAX_ROWS); r++) {
      const line = this.map.line(r);
      const [store, local] = m.at(line);
      const text = store.line(local);
      const { hits, current } = this.finder.hitsOn(store, local, text.length);
      const section = this.headers.get(line);
      const mk = this.marked;
      data.push({
        id: `${store === m.tail ? 't' : 'h'}${local}`,
        number: m.number(line),
        text,
        runs: store.lineRuns(local),
        hits,
        current,
        section: section && { name: section.name, collapsed: this.folds.collapsed(section) },
        marked: mk !== undefined && mk.local === local && mk.tail === (store === m.tail),
        version: m.isOpen(line) ? store.openVersion : 0,
      });
    }
    this.pool.draw(data);
    this.geometry.set(S.spacerHeight(g) - g.viewport, w.offset);
    this.revealCurrent();
  }

  /** Scrolls sideways to the current hit when it is out of view (long lines). */
  private revealCurrent(): void {
    const mark = this.ui.rows.querySelector<HTMLElement>('mark.lv-current');
    if (mark === null) return;
    const s = this.ui.scroller;
    const left = mark.offsetLeft;
    if (left < s.scrollLeft || left + mark.offsetWidth > s.scrollLeft + s.clientWidth)
      s.scrollLeft = Math.max(0, left - s.clientWidth / 3);
  }

  private measure(): void {
    const h = this.pool.element(0)?.getBoundingClientRect().height ?? 0;
    if (h > 0 && Math.abs(h - this.rowHeight) > 0.01) {
      this.rowHeight = h;
      this.schedule();
    }
  }

  /** Sections and the rows they leave, when markers, lines or folds changed. */
  private updateMap(): void {
    const m = this.model;
    const key = `${m.head.markers.length}|${m.tail.markers.length}|${m.head.count}`;
    if (key !== this.sectionsKey) {
      this.sectionsKey = key;
      this.sections = buildSections(m.markers());
      this.headers = new Map(this.sections.map((s) => [s.start, s]));
      this.ui.expand.hidden = this.ui.collapse.hidden = this.sections.length === 0;
      this.foldsChanged = true;
    }
    if (this.foldsChanged || this.map.lines !== m.lines) {
      this.map = new RowMap(m.lines, hiddenRanges(this.sections, this.folds, m.lines));
      this.foldsChanged = false;
    }
  }

  private ref(line: number): Ref {
    const [store, local] = this.model.at(line);
    return { tail: store === this.model.tail, local };
  }

  private lineOf(r: Ref): number {
    return r.tail ? r.local + this.model.head.count : r.local;
  }

  private anchorTop(): number {
    return this.map.row(this.lineOf(this.anchor)) * this.rowHeight + this.anchor.offset;
  }

  private setAnchor(top: number): void {
    const row = Math.max(0, Math.min(Math.floor(top / this.rowHeight), this.map.rows - 1));
    this.anchor = { ...this.ref(this.map.line(row)), offset: top - row * this.rowHeight };
  }

  /** The reader moved the view to virtual top `top`. */
  private userMove(top: number): void {
    const g = this.geom();
    this.top = S.clampTop(g, top);
    this.following = S.atEnd(g, this.top);
    this.setAnchor(this.top);
    this.schedule();
  }

  /** Puts line `line` in the middle of the view, opening the sections that hide it. */
  private goToLine(line: number): void {
    for (const s of sectionsHiding(this.sections, this.folds, line)) {
      this.folds.set(s, false);
      this.foldsChanged = true;
    }
    this.updateMap();
    this.following = false;
    this.setAnchor(S.centreTop(this.geom(), this.map.row(line)));
    this.schedule();
  }

  private hashLine(): number {
    const m = /^#L(\d+)$/.exec(location.hash);
    return m === null ? 0 : Number(m[1]);
  }

  /** Goes to the `#L<n>` line once it is held (and numbered). */
  private tryHash(): void {
    const m = this.model;
    const i = this.pendingLine - 1;
    const held = i < m.head.count || (m.headDone && i < m.head.count + m.tail.count);
    if (held) {
      this.marked = this.ref(i);
      this.goToLine(i);
      this.pendingLine = 0;
    } else if (m.headDone && m.done) this.pendingLine = 0;
  }

  /** The position of the view's top line, for a new search. */
  private topPosition(): Position {
    const [store, local] = this.model.at(this.map.line(Math.floor(this.top / this.rowHeight)));
    return [store === this.model.head ? 0 : 1, local < store.count ? store.lineStart(local) : Infinity];
  }

  private listen(): void {
    const { scroller, rows, search } = this.ui;
    scroller.addEventListener('scroll', () => this.scrolled());
    scroller.addEventListener(
      'wheel',
      (e) => {
        const g = this.geom();
        const dy = S.wheelPixels(e.deltaY, e.deltaMode, this.rowHeight, this.viewport);
        if (dy < 0) this.following = false;
        if (!S.scaled(g) || Math.abs(e.deltaX) > Math.abs(e.deltaY)) return;
        e.preventDefault();
        this.userMove(this.top + dy);
      },
      { passive: false },
    );
    scroller.addEventListener('keydown', (e) => this.key(e));
    rows.addEventListener('click', (e) => {
      const target = e.target as Element;
      const row = target.closest<HTMLElement>('.lv-row');
      if (row === null) return;
      const id = row.dataset.line ?? 'h0';
      const line = this.lineOf({ tail: id.startsWith('t'), local: Number(id.slice(1)) });
      if (target.closest('.lv-fold') !== null) {
        const s = this.headers.get(line);
        if (s === undefined) return;
        this.folds.set(s, !this.folds.collapsed(s));
        this.foldsChanged = true;
        this.schedule();
      } else if (target.closest('a.lv-ln[href]') !== null) {
        e.preventDefault();
        history.replaceState(null, '', `#L${this.model.number(line)}`);
        this.marked = this.ref(line);
        this.following = false;
        this.setAnchor(this.top);
        this.schedule();
      }
    });
    this.ui.follow.addEventListener('click', () => {
      this.following = !this.following;
      if (!this.following) this.setAnchor(this.top);
      this.schedule();
    });
    for (const [button, collapsed] of [
      [this.ui.expand, false],
      [this.ui.collapse, true],
    ] as const) {
      button.addEventListener('click', () => {
        this.folds.setAll(collapsed);
        this.foldsChanged = true;
        this.schedule();
      });
    }
    this.finder.attach(
      search,
      this.ui.prev,
      this.ui.next,
      () => this.topPosition(),
      () => this.schedule(),
    );
    window.addEventListener('hashchange', () => {
      this.pendingLine = this.hashLine();
      this.schedule();
    });
  }

  private key(e: KeyboardEvent): void {
    if ((e.target as Element).closest('button') !== null && (e.key === ' ' || e.key === 'Enter')) return;
    const move = S.keyMove(e.key, e.shiftKey, this.rowHeight, this.viewport);
    if (move === undefined) return;
    e.preventDefault();
    if (move === 'end') {
      this.following = true;
      this.schedule();
    } else if (move === 'home') this.userMove(0);
    else {
      if (move < 0) this.following = false;
      this.userMove(this.top + move);
    }
  }
}
