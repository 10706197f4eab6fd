/**
 * The viewer's constructed stylesheet (`new CSSStyleSheet()` in `document.adoptedStyleSheets`).
 * The page's policy (`style-src 'self'`) refuses `style` attributes and `<style>` elements, but
 * not a stylesheet built through the CSSOM (checked in Chromium under the real header, no
 * violation reported). It holds what log.css cannot know in advance:
 *
 * - the xterm palette's entries 16..255 as classes (`lv-f<n>`, `lv-b<n>`; 0..15 are in log.css,
 *   with colours chosen for the log's background);
 * - 24-bit colours, one class per colour met (`lv-fx<rrggbb>`, `lv-bx<rrggbb>`), at most
 *   `MAX_TRUE`; past that a colour takes its nearest palette entry;
 * - each viewer's geometry: the spacer's height, the rows' offset and their least width.
 *
 * No element of the page has a `style` of its own.
 */
import {
  DEFAULT,
  INVERSE,
  BOLD,
  DIM,
  ITALIC,
  UNDERLINE,
  STRIKE,
  TRUE,
  nearest256,
  xterm,
  type Style,
} from './ansi.ts';

const MAX_TRUE = 1024;

const hex = (rgb: number) => rgb.toString(16).padStart(6, '0');

let shared: CSSStyleSheet | undefined;
const trueColours = new Set<number>();

function sheet(): CSSStyleSheet {
  if (shared !== undefined) return shared;
  const s = new CSSStyleSheet();
  const rules: string[] = [];
  for (let n = 16; n < 256; n++) {
    rules.push(`.lv-f${n}{color:#${hex(xterm(n))}}`, `.lv-b${n}{background-color:#${hex(xterm(n))}}`);
  }
  s.replaceSync(rules.join('\n'));
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, s];
  return (shared = s);
}

function colourClass(c: number, bg: boolean): string {
  const p = bg ? 'lv-b' : 'lv-f';
  if (c < TRUE) return `${p}${c}`;
  const rgb = c - TRUE;
  const key = bg ? rgb + TRUE : rgb;
  if (!trueColours.has(key)) {
    if (trueColours.size >= MAX_TRUE) return `${p}${nearest256(rgb)}`;
    const s = sheet();
    const prop = bg ? 'background-color' : 'color';
    s.insertRule(`.${p}x${hex(rgb)}{${prop}:#${hex(rgb)}}`, s.cssRules.length);
    trueColours.add(key);
  }
  return `${p}x${hex(rgb)}`;
}

/** The classes of a style (an empty string for the default). */
export function styleClasses(st: Style): string {
  let { fg, bg } = st;
  const out: string[] = [];
  if (st.flags & INVERSE) {
    [fg, bg] = [bg, fg];
    if (fg === DEFAULT) out.push('lv-fi');
    if (bg === DEFAULT) out.push('lv-bi');
  }
  if (fg !== DEFAULT) out.push(colourClass(fg, false));
  if (bg !== DEFAULT) out.push(colourClass(bg, true));
  if (st.flags & BOLD) out.push('lv-bold');
  if (st.flags & DIM) out.push('lv-dim');
  if (st.flags & ITALIC) out.push('lv-italic');
  if (st.flags & UNDERLINE) out.push('lv-under');
  if (st.flags & STRIKE) out.push('lv-strike');
  return out.join(' ');
}

/** One viewer's geometry rules (scoped by its class `lv-<id>`). */
export class Geometry {
  private readonly spacer: CSSStyleRule;
  private readonly rows: CSSStyleRule;
  private last = { spacer: -1, offset: -1, width: 0 };

  constructor(id: number) {
    const s = sheet();
    const at = s.cssRules.length;
    s.insertRule(`.lv-${id} .lv-spacer{height:0px}`, at);
    s.insertRule(`.lv-${id} .lv-rows{transform:translateY(0px);min-width:100%}`, at + 1);
    this.spacer = s.cssRules[at] as CSSStyleRule;
    this.rows = s.cssRules[at + 1] as CSSStyleRule;
  }

  set(spacer: number, offset: number): void {
    if (spacer !== this.last.spacer) this.spacer.style.setProperty('height', `${spacer}px`);
    if (offset !== this.last.offset) this.rows.style.setProperty('transform', `translateY(${-offset}px)`);
    this.last.spacer = spacer;
    this.last.offset = offset;
  }

  /** Widens the rows to `px` (never narrows them: the horizontal scrollbar does not come and go). */
  widen(px: number): void {
    if (px <= this.last.width) return;
    this.last.width = px;
    this.rows.style.setProperty('min-width', `${px}px`);
  }
}
