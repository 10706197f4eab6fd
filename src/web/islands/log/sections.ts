/**
 * Collapsible sections of a log. Two marker styles are recognised, each on a line of its own:
 *
 * - GitHub Actions: `::group::Title` … `::endgroup::`. Groups do not nest: a new group ends the
 *   one before. A finished group is shown collapsed.
 * - GitLab CI: `section_start:<unix time>:<name>[collapsed=true]` … `section_end:<unix time>:<name>`,
 *   usually written as `\e[0Ksection_start:…:<name>\r\e[0KHeader text` (the line shows the
 *   header text). Sections nest; an end closes its section and any left open inside it. A
 *   section is shown expanded unless its start says `[collapsed=true]`.
 *
 * A section still running (no end yet) is shown expanded. The reader's own choice (the toggle,
 * "Expand all", "Collapse all") wins over these defaults and is kept per section.
 * Folding hides the lines after the header up to and including the end marker; line numbers
 * stay those of the log. `RowMap` maps the rows shown to log lines and back.
 *
 * No DOM here (unit-tested under Node).
 */

export type Marker = {
  /** A key stable while lines are added before it (its store and line there). */
  key: string;
  /** The line in the whole log (filled in when the markers are gathered). */
  line: number;
  start: boolean;
  kind: 'group' | 'section';
  /** The GitLab section's name, or the group's title. */
  name: string;
  collapsed: boolean;
};

// eslint-disable-next-line no-control-regex
const GITLAB = /^(?:\x1b\[[0-9;]*K)?section_(start|end):\d+:([A-Za-z0-9_.-]+)(\[[^\]]*\])?/;

/** The marker a line is (`raw`: as logged, `text`: made plain), if any. */
export function detectMarker(raw: string, text: string): Omit<Marker, 'key' | 'line'> | undefined {
  if (text.startsWith('::group::'))
    return { start: true, kind: 'group', name: text.slice(9).trim(), collapsed: true };
  if (text.startsWith('::endgroup::')) return { start: false, kind: 'group', name: '', collapsed: false };
  if (!raw.includes('section_')) return undefined;
  const m = GITLAB.exec(raw);
  if (m === null) return undefined;
  const collapsed = m[1] === 'start' && /\bcollapsed=true\b/.test(m[3] ?? '');
  return { start: m[1] === 'start', kind: 'section', name: m[2]!, collapsed };
}

export type Section = {
  key: string;
  kind: 'group' | 'section';
  name: string;
  /** The header line. */
  start: number;
  /** The end marker's line; -1 while the section runs. */
  end: number;
  collapsedWhenDone: boolean;
  depth: number;
};

/** The sections the markers (in log order) make, in the order of their header lines. */
export function buildSections(markers: readonly Marker[]): Section[] {
  const out: Section[] = [];
  const open: Section[] = [];
  const close = (upTo: number, line: number) => {
    while (open.length > upTo) open.pop()!.end = line;
  };
  for (const m of markers) {
    if (m.kind === 'group') {
      const g = open.findLastIndex((s) => s.kind === 'group');
      if (m.start) {
        if (g >= 0) close(g, m.line - 1);
        const s: Section = {
          key: m.key,
          kind: 'group',
          name: m.name,
          start: m.line,
          end: -1,
          collapsedWhenDone: true,
          depth: open.length,
        };
        out.push(s);
        open.push(s);
      } else if (g >= 0) close(g, m.line);
    } else if (m.start) {
      const s: Section = {
        key: m.key,
        kind: 'section',
        name: m.name,
        start: m.line,
        end: -1,
        collapsedWhenDone: m.collapsed,
        depth: open.length,
      };
      out.push(s);
      open.push(s);
    } else {
      const i = open.findLastIndex((s) => s.kind === 'section' && s.name === m.name);
      if (i >= 0) close(i, m.line);
    }
  }
  return out;
}

/** The reader's fold choices: all at once, then per section. */
export class Folds {
  private readonly chosen = new Map<string, boolean>();
  private all: boolean | undefined;

  collapsed(s: Section): boolean {
    return this.chosen.get(s.key) ?? this.all ?? (s.end >= 0 && s.collapsedWhenDone);
  }

  set(s: Section, collapsed: boolean): void {
    this.chosen.set(s.key, collapsed);
  }

  setAll(collapsed: boolean): void {
    this.chosen.clear();
    this.all = collapsed;
  }
}

/** Rows shown <-> log lines, given the hidden line ranges (sorted, disjoint). */
export class RowMap {
  /** First hidden line of each range, its last, and the lines hidden before it. */
  private readonly from: number[] = [];
  private readonly to: number[] = [];
  private readonly before: number[] = [];
  readonly rows: number;
  readonly lines: number;

  constructor(lines: number, hidden: ReadonlyArray<readonly [number, number]>) {
    this.lines = lines;
    let total = 0;
    for (const [a, b] of hidden) {
      const last = Math.min(b, lines - 1);
      if (last < a) continue;
      this.from.push(a);
      this.to.push(last);
      this.before.push(total);
      total += last - a + 1;
    }
    this.rows = lines - total;
  }

  /** The log line shown on row `r`. */
  line(r: number): number {
    // ranges whose first line would be on a row <= r
    let lo = 0;
    let hi = this.from.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.from[mid]! - this.before[mid]! <= r) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return r;
    return r + this.before[lo - 1]! + (this.to[lo - 1]! - this.from[lo - 1]! + 1);
  }

  /** The row showing line `l`, or its section's header row when it is folded away. */
  row(l: number): number {
    const k = this.rangeBefore(l);
    if (k < 0) return l;
    if (l <= this.to[k]!) return this.from[k]! - 1 - this.before[k]!;
    return l - this.before[k]! - (this.to[k]! - this.from[k]! + 1);
  }

  /** Whether line `l` is folded away. */
  hidden(l: number): boolean {
    const k = this.rangeBefore(l);
    return k >= 0 && l <= this.to[k]!;
  }

  /** The last range starting at or before line `l`, or -1. */
  private rangeBefore(l: number): number {
    let lo = 0;
    let hi = this.from.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.from[mid]! <= l) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }
}

/** The line ranges the collapsed sections hide (a collapsed section inside a hidden one adds nothing). */
export function hiddenRanges(
  sections: readonly Section[],
  folds: Folds,
  lines: number,
): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let hiddenUpTo = -1;
  for (const s of sections) {
    if (s.start <= hiddenUpTo || !folds.collapsed(s)) continue;
    const last = s.end >= 0 ? s.end : lines - 1;
    if (last <= s.start) continue;
    out.push([s.start + 1, last]);
    hiddenUpTo = last;
  }
  return out;
}

/** The sections whose folded bodies hide line `l` (to open them when the reader is sent there). */
export function sectionsHiding(sections: readonly Section[], folds: Folds, l: number): Section[] {
  return sections.filter((s) => s.start < l && (s.end < 0 || l <= s.end) && folds.collapsed(s));
}
