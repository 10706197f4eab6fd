/**
 * Terminal output of one log line made plain: SGR escapes (`ESC [ … m`) become style runs, every
 * other escape (cursor moves, OSC titles and links, charset switches) and control character but
 * the tab is dropped, and a carriage return starts the line again (what a terminal shows at last
 * for progress bars: the text after the last `\r` that is followed by text). Erasing the line
 * (`ESC [ K` right after a `\r`, or `ESC [ 2 K`) empties it.
 *
 * Styles are interned in a `StyleTable` as small numbers (0: the default), so a line's runs are a
 * flat list `[column, style, column, style, …]`, each run lasting to the next or the line's end.
 * The style at a line's end is the next line's start, as in a terminal.
 *
 * No DOM here (unit-tested under Node).
 */

export const BOLD = 1;
export const DIM = 2;
export const ITALIC = 4;
export const UNDERLINE = 8;
export const STRIKE = 16;
export const INVERSE = 32;

/** A colour: -1 the default, 0..255 the xterm palette, `TRUE + 0xRRGGBB` a 24-bit colour. */
export const DEFAULT = -1;
export const TRUE = 0x1000000;

export type Style = { fg: number; bg: number; flags: number };

/** Styles by number; 0 is the default style. */
export class StyleTable {
  private readonly ids = new Map<string, number>([['-1,-1,0', 0]]);
  readonly styles: Style[] = [{ fg: DEFAULT, bg: DEFAULT, flags: 0 }];
  /** SGR parameters applied to a style before: `<style>|<params>` -> style. */
  readonly applied = new Map<string, number>();

  id(fg: number, bg: number, flags: number): number {
    const key = `${fg},${bg},${flags}`;
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.styles.length;
      this.styles.push({ fg, bg, flags });
      this.ids.set(key, id);
    }
    return id;
  }

  get(id: number): Style {
    return this.styles[id] ?? this.styles[0]!;
  }
}

/** A line made plain: its text, its style runs (null when all of it is in the default style) and the style at its end. */
export type Plain = { text: string; runs: number[] | null; end: number };

/** Characters that need the slow path: C0 controls but tab and newline, DEL. */
// eslint-disable-next-line no-control-regex
export const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/;

/** The SGR parameters `params` (between `ESC [` and `m`) applied to the style `id`. */
export function applySgr(table: StyleTable, id: number, params: string): number {
  const key = `${id}|${params}`;
  let next = table.applied.get(key);
  if (next === undefined) {
    next = sgr(table, id, params);
    if (table.applied.size < 10_000) table.applied.set(key, next);
  }
  return next;
}

function sgr(table: StyleTable, id: number, params: string): number {
  const s = table.get(id);
  let { fg, bg, flags } = s;
  const parts = params === '' ? ['0'] : params.split(';');
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (part.includes(':')) {
      // ITU form: 38:5:n, 38:2::r:g:b or 38:2:r:g:b (and 4:x underline styles)
      const sub = part.split(':').map((x) => (x === '' ? -1 : Number(x)));
      const colour = extended(sub.slice(1), true);
      if (sub[0] === 38 && colour !== undefined) fg = colour;
      else if (sub[0] === 48 && colour !== undefined) bg = colour;
      else if (sub[0] === 4) flags = sub[1] === 0 ? flags & ~UNDERLINE : flags | UNDERLINE;
      continue;
    }
    const code = part === '' ? 0 : Number(part);
    if (code === 38 || code === 48) {
      const rest = parts.slice(i + 1).map(Number);
      const colour = extended(rest, false);
      i += rest[0] === 5 ? 2 : rest[0] === 2 ? 4 : 0;
      if (colour !== undefined) {
        if (code === 38) fg = colour;
        else bg = colour;
      }
      continue;
    }
    if (code === 0) [fg, bg, flags] = [DEFAULT, DEFAULT, 0];
    else if (code === 1) flags |= BOLD;
    else if (code === 2) flags |= DIM;
    else if (code === 3) flags |= ITALIC;
    else if (code === 4 || code === 21) flags |= UNDERLINE;
    else if (code === 7) flags |= INVERSE;
    else if (code === 9) flags |= STRIKE;
    else if (code === 22) flags &= ~(BOLD | DIM);
    else if (code === 23) flags &= ~ITALIC;
    else if (code === 24) flags &= ~UNDERLINE;
    else if (code === 27) flags &= ~INVERSE;
    else if (code === 29) flags &= ~STRIKE;
    else if (code >= 30 && code <= 37) fg = code - 30;
    else if (code === 39) fg = DEFAULT;
    else if (code >= 40 && code <= 47) bg = code - 40;
    else if (code === 49) bg = DEFAULT;
    else if (code >= 90 && code <= 97) fg = code - 90 + 8;
    else if (code >= 100 && code <= 107) bg = code - 100 + 8;
    // anything else (blink, fonts, overline, …) is ignored
  }
  return fg === s.fg && bg === s.bg && flags === s.flags ? id : table.id(fg, bg, flags);
}

/** `5;n` or `2;r;g;b` (`2;;r;g;b` in the colon form) as a colour; undefined when malformed. */
function extended(p: number[], colon: boolean): number | undefined {
  const byte = (n: number | undefined) => n !== undefined && Number.isInteger(n) && n >= 0 && n <= 255;
  if (p[0] === 5) return byte(p[1]) ? p[1]! : undefined;
  if (p[0] !== 2) return undefined;
  // the colon form may carry a colour space id before r:g:b (empty or a number)
  const rgb = colon && p.length >= 5 ? p.slice(2, 5) : p.slice(1, 4);
  if (rgb.length !== 3 || !rgb.every(byte)) return undefined;
  return TRUE + (rgb[0]! << 16) + (rgb[1]! << 8) + rgb[2]!;
}

/**
 * Where the escape sequence starting at `i` (an ESC) ends (the index after it) and, for SGR,
 * its parameters.
 */
function escapeEnd(raw: string, i: number): { end: number; sgr?: string; erase?: string } {
  const n = raw.length;
  const kind = raw.charCodeAt(i + 1);
  if (kind === 0x5b) {
    // CSI: parameters 0x30-0x3f, intermediates 0x20-0x2f, one final byte 0x40-0x7e
    let j = i + 2;
    while (j < n && raw.charCodeAt(j) >= 0x30 && raw.charCodeAt(j) <= 0x3f) j++;
    const paramsEnd = j;
    while (j < n && raw.charCodeAt(j) >= 0x20 && raw.charCodeAt(j) <= 0x2f) j++;
    if (j >= n) return { end: n };
    const final = raw.charCodeAt(j);
    if (final === 0x6d && paramsEnd === j) return { end: j + 1, sgr: raw.slice(i + 2, paramsEnd) };
    if (final === 0x4b && paramsEnd === j) return { end: j + 1, erase: raw.slice(i + 2, paramsEnd) };
    return { end: final >= 0x40 && final <= 0x7e ? j + 1 : j };
  }
  if (kind === 0x5d || kind === 0x50 || kind === 0x58 || kind === 0x5e || kind === 0x5f) {
    // OSC, DCS, SOS, PM, APC: up to BEL (OSC) or ST (ESC \)
    for (let j = i + 2; j < n; j++) {
      const c = raw.charCodeAt(j);
      if (c === 0x07 && kind === 0x5d) return { end: j + 1 };
      if (c === 0x1b && raw.charCodeAt(j + 1) === 0x5c) return { end: j + 2 };
    }
    return { end: n };
  }
  // ESC, intermediates, one final byte (charset selection, keypad modes, …)
  let j = i + 1;
  while (j < n && raw.charCodeAt(j) >= 0x20 && raw.charCodeAt(j) <= 0x2f) j++;
  return { end: Math.min(n, j + 1) };
}

/** One raw line (without its newline) made plain, starting in style `start`. */
export function parseLine(raw: string, start: number, table: StyleTable): Plain {
  if (!CONTROL.test(raw)) {
    return { text: raw, runs: start === 0 || raw === '' ? null : [0, start], end: start };
  }
  let text = '';
  let runs: number[] = [];
  let style = start;
  let restart = false;
  const emit = (s: string) => {
    if (s === '') return;
    if (restart) {
      text = '';
      runs = [];
      restart = false;
    }
    const last = runs.length - 2;
    if (last >= 0 && runs[last] === text.length) runs[last + 1] = style;
    else if (last < 0 || runs[last + 1] !== style) runs.push(text.length, style);
    text += s;
  };
  let from = 0;
  for (let i = 0; i < raw.length;) {
    const c = raw.charCodeAt(i);
    if (c === 0x1b) {
      emit(raw.slice(from, i));
      const e = escapeEnd(raw, i);
      if (e.sgr !== undefined) style = applySgr(table, style, e.sgr);
      // erase in line: after a carriage return (or all of it, `2K`) the line is empty again
      else if (e.erase === '2' || (restart && (e.erase === '' || e.erase === '0'))) {
        text = '';
        runs = [];
        restart = false;
      }
      i = from = e.end;
    } else if (c === 0x0d) {
      emit(raw.slice(from, i));
      restart = true;
      i = from = i + 1;
    } else if ((c < 0x20 && c !== 0x09) || c === 0x7f) {
      emit(raw.slice(from, i));
      i = from = i + 1;
    } else i++;
  }
  emit(raw.slice(from));
  const plainRuns = runs.length === 0 || (runs.length === 2 && runs[1] === 0) ? null : runs;
  return { text, runs: plainRuns, end: style };
}

/** The xterm colour of palette entry `n` (16..255) as 0xRRGGBB. */
export function xterm(n: number): number {
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return (v << 16) | (v << 8) | v;
  }
  const i = n - 16;
  const level = (x: number) => (x === 0 ? 0 : 55 + x * 40);
  return (level(Math.floor(i / 36)) << 16) | (level(Math.floor(i / 6) % 6) << 8) | level(i % 6);
}

/** The palette entry (16..255) nearest to 0xRRGGBB: for 24-bit colours beyond the class budget. */
export function nearest256(rgb: number): number {
  const r = (rgb >> 16) & 255;
  const g = (rgb >> 8) & 255;
  const b = rgb & 255;
  const step = (v: number) => (v < 48 ? 0 : v < 115 ? 1 : Math.min(5, Math.floor((v - 35) / 40)));
  const cube = 16 + 36 * step(r) + 6 * step(g) + step(b);
  const grey = Math.min(23, Math.max(0, Math.round(((r + g + b) / 3 - 8) / 10)));
  const dist = (c: number) => {
    const x = xterm(c);
    return (((x >> 16) & 255) - r) ** 2 + (((x >> 8) & 255) - g) ** 2 + ((x & 255) - b) ** 2;
  };
  return dist(232 + grey) < dist(cube) ? 232 + grey : cube;
}
