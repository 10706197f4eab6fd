import { describe, expect, test } from '@jest/globals';
import { StyleTable } from '../../src/web/islands/log/ansi.ts';
import { MAX_HITS, Search } from '../../src/web/islands/log/search.ts';
import { LineStore } from '../../src/web/islands/log/store.ts';

function store(text: string): LineStore {
  const s = new LineStore(new StyleTable(), 't');
  s.append(text);
  return s;
}

/** The hits of a search as [source, line, column]. */
function hits(search: Search, sources: LineStore[]): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = [];
  for (let k = 0; k < search.total; k++) {
    const [src, pos] = search.hit(k)!;
    const line = sources[src]!.lineAt(pos);
    out.push([src, line, pos - sources[src]!.lineStart(line)]);
  }
  return out;
}

describe('log search', () => {
  test('case-insensitive substring over head then tail, plain text (no escapes)', () => {
    const head = store('An Error here\nnothing\n\x1b[31mERR\x1b[0mOR split by colour\n');
    const tail = store('error again, error\n');
    const sources = [head, tail];
    const s = new Search('error', sources);
    expect(s.run(50, () => 0)).toBe(true);
    expect(hits(s, sources)).toEqual([
      [0, 0, 3],
      [0, 2, 0],
      [1, 0, 0],
      [1, 0, 13],
    ]);
    expect(s.firstFrom(0, head.lineStart(1))).toBe(1);
    expect(s.firstFrom(1, 1)).toBe(3);
    expect(s.firstFrom(1, 1000)).toBe(-1);
    expect(s.indexOf(1, 13)).toBe(3);
    expect(s.indexOf(1, 12)).toBe(-1);
    expect(s.within(1, 0, 19)).toEqual([0, 13]);
  });

  test('special characters are literal; wide text is found on the wide lines', () => {
    const sources = [store('a.b a+b (x)\nok ✓ done\nno\nÉTÉ été\n'), store('✓✓\n')];
    const dot = new Search('a+b', sources);
    dot.run(50, () => 0);
    expect(hits(dot, sources)).toEqual([[0, 0, 4]]);
    const tick = new Search('✓', sources);
    tick.run(50, () => 0);
    expect(hits(tick, sources)).toEqual([
      [0, 1, 3],
      [1, 0, 0],
      [1, 0, 1],
    ]);
    const latin = new Search('été', sources);
    latin.run(50, () => 0);
    expect(hits(latin, sources).length).toBe(2);
    // narrow text of a wide line is found at its column
    const done = new Search('done', sources);
    done.run(50, () => 0);
    expect(hits(done, sources)).toEqual([[0, 1, 5]]);
  });

  test('incremental: stops on the budget, goes on, and over lines added later', () => {
    const head = new LineStore(new StyleTable(), 'h');
    for (let c = 0; c < 10; c++) {
      head.append(
        `${Array.from({ length: 10_000 }, (_, i) => `chunk ${c} line ${i}${i % 1000 === 7 ? ' needle' : ''}`).join('\n')}\n`,
      );
      head.seal();
    }
    let clock = 0;
    const s = new Search('NEEDLE', [head]);
    // a clock that runs out at once: one chunk per call
    expect(s.run(0, () => (clock += 1))).toBe(false);
    let calls = 1;
    while (!s.run(0, () => (clock += 1))) calls++;
    expect(calls).toBeGreaterThan(2);
    expect(s.total).toBe(100);
    head.append('a needle at the end\n');
    expect(s.run(50, () => 0)).toBe(true);
    expect(s.total).toBe(101);
  });

  test('stops at MAX_HITS', () => {
    const s = new Search('a', [store(`${'a'.repeat(1000)}\n`.repeat(MAX_HITS / 1000 + 5))]);
    expect(s.run(1000, () => 0)).toBe(true);
    expect(s.total).toBe(MAX_HITS);
    expect(s.capped).toBe(true);
  });

  // its time is measured by bench/log-viewer.ts (bench/README.md), not here: a loaded machine
  // makes any wall-clock bound in a test flaky
  test('a million lines: the one match is found within one run', () => {
    const s = new LineStore(new StyleTable(), 't');
    const block: string[] = [];
    for (let i = 0; i < 1_000_000; i++) {
      block.push(
        `2026-11-30T12:00:00.000Z [build] compiling src/pkg${i % 97}/module${i % 13}.ts (line ${i})    `,
      );
      if (block.length === 10_000) {
        s.append(`${block.join('\n')}\n`);
        block.length = 0;
      }
    }
    const search = new Search('(line 777751)', [s]);
    expect(search.run(10_000, () => performance.now())).toBe(true);
    expect(search.total).toBe(1);
    expect(s.lineAt(search.hit(0)![1])).toBe(777_751);
  });
});
