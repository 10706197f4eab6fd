/**
 * The scroll mapping. The rows are `rows × rowHeight` pixels of "virtual" content, but browsers
 * cap an element's height (about 33.5 million px in Chromium, 17.9 million in Firefox), and a
 * million 20 px rows are 20 million px. The scroller's spacer is therefore at most `CAP` tall,
 * and the scroll position maps linearly to the virtual position: the scrollbar's thumb reaches
 * every row, first to last. Wheel and keys move the virtual position by exact pixels (the viewer
 * then sets the scroll position from it), so the scale never shows near the reader's position;
 * only a drag of the thumb (or any scroll the viewer did not make) is read through the scale.
 * Below the cap the mapping is the identity and the browser scrolls natively.
 *
 * No DOM here (unit-tested under Node).
 */

/** The tallest spacer made (well under Firefox's limit). */
export const CAP = 8_000_000;

export type Geometry = {
  /** Rows shown (after folding). */
  rows: number;
  rowHeight: number;
  /** The scroller's inner height. */
  viewport: number;
  cap?: number;
};

/** The virtual content's height. */
export function contentHeight(g: Geometry): number {
  return g.rows * g.rowHeight;
}

/** The spacer's height: the content's, capped, and at least the viewport's. */
export function spacerHeight(g: Geometry): number {
  return Math.max(g.viewport, Math.min(contentHeight(g), g.cap ?? CAP));
}

export function scaled(g: Geometry): boolean {
  return contentHeight(g) > (g.cap ?? CAP);
}

/** The largest virtual top (the last row at the bottom of the viewport). */
export function maxTop(g: Geometry): number {
  return Math.max(0, contentHeight(g) - g.viewport);
}

/** The largest scroll position. */
export function maxScroll(g: Geometry): number {
  return spacerHeight(g) - g.viewport;
}

export function clampTop(g: Geometry, top: number): number {
  return Math.min(maxTop(g), Math.max(0, top));
}

/** The scroll position showing virtual top `top`. */
export function toScroll(g: Geometry, top: number): number {
  const vmax = maxTop(g);
  if (vmax === 0) return 0;
  return (clampTop(g, top) * maxScroll(g)) / vmax;
}

/** The virtual top a scroll position shows. */
export function fromScroll(g: Geometry, scroll: number): number {
  const smax = maxScroll(g);
  if (smax <= 0) return 0;
  return clampTop(g, (Math.min(smax, Math.max(0, scroll)) * maxTop(g)) / smax);
}

/** The virtual top that puts row `row` in the middle of the viewport. */
export function centreTop(g: Geometry, row: number): number {
  return clampTop(g, row * g.rowHeight - (g.viewport - g.rowHeight) / 2);
}

/** The rows to draw for virtual top `top`: the first, how many, and the first one's pixel offset. */
export function visibleRows(g: Geometry, top: number): { first: number; count: number; offset: number } {
  const t = clampTop(g, top);
  const first = Math.min(Math.floor(t / g.rowHeight), Math.max(0, g.rows - 1));
  const offset = t - first * g.rowHeight;
  const count = Math.max(0, Math.min(g.rows - first, Math.ceil((g.viewport + offset) / g.rowHeight)));
  return { first, count, offset };
}

/** Whether the virtual top shows the last row at the bottom (within half a row). */
export function atEnd(g: Geometry, top: number): boolean {
  return top >= maxTop(g) - g.rowHeight / 2;
}

/** A wheel event's vertical move in pixels (`deltaMode`: 0 pixels, 1 lines, 2 pages). */
export function wheelPixels(deltaY: number, deltaMode: number, rowHeight: number, viewport: number): number {
  if (deltaMode === 1) return deltaY * rowHeight;
  if (deltaMode === 2) return deltaY * viewport;
  return deltaY;
}

/**
 * What a key does in the log: a move in pixels (arrows: two rows; Page Up / Down, Space and
 * Shift+Space: a viewport less a row), `home` (the first line) or `end` (the last, following);
 * undefined for other keys.
 */
export function keyMove(
  key: string,
  shift: boolean,
  rowHeight: number,
  viewport: number,
): number | 'home' | 'end' | undefined {
  const page = Math.max(rowHeight, viewport - rowHeight);
  switch (key) {
    case 'ArrowDown':
      return 2 * rowHeight;
    case 'ArrowUp':
      return -2 * rowHeight;
    case 'PageDown':
      return page;
    case 'PageUp':
      return -page;
    case ' ':
      return shift ? -page : page;
    case 'Home':
      return 'home';
    case 'End':
      return 'end';
    default:
      return undefined;
  }
}
