import { describe, expect, test } from '@jest/globals';
import { StyleTable } from '../../src/web/islands/log/ansi.ts';
import { LogModel } from '../../src/web/islands/log/model.ts';
import { LineStore } from '../../src/web/islands/log/store.ts';
import { asciiRuns, nextHigh } from '../../src/web/islands/log/bytes.ts';

function lines(s: LineStore): string[] {
  return Array.from({ length: s.lines }, (_, i) => s.line(i));
}

/** The text split into pieces of `n` characters (as stream events cut it). */
function cut(text: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += n) out.push(text.slice(i, i + n));
  return out;
}

describe('log line store', () => {
  test('lines split across appends, the open line, finish', () => {
    const s = new LineStore(new StyleTable(), 't');
    expect(s.append('one\ntw')).toBe(1);
    expect(lines(s)).toEqual(['one', 'tw']);
    expect(s.count).toBe(1);
    const v = s.openVersion;
    expect(s.append('o\nthree')).toBe(1);
    expect(s.openVersion).toBeGreaterThan(v);
    expect(lines(s)).toEqual(['one', 'two', 'three']);
    s.finish();
    expect(s.count).toBe(3);
    expect(lines(s)).toEqual(['one', 'two', 'three']);
    expect(s.append('\n')).toBe(1);
    expect(lines(s)).toEqual(['one', 'two', 'three', '']);
  });

  test('any cut of a coloured, sectioned, partly wide log gives the same lines, runs and markers', () => {
    const raw = [
      'plain line',
      '\x1b[31mred\x1b[0m and plain',
      '::group::Build',
      'inside ✓ wide 日本',
      '\x1b[32mgreen starts',
      'and goes on',
      '\x1b[0m::endgroup::',
      'progress 10%\rprogress 100%',
      '\x1b[0Ksection_start:1:tests[collapsed=true]\r\x1b[0KTests',
      'emoji 😀 and é',
      '\x1b[0Ksection_end:1:tests\r\x1b[0K',
      'a bell\x07 and a backspace\x08',
      'last',
    ].join('\n');
    const want = [
      'plain line',
      'red and plain',
      '::group::Build',
      'inside ✓ wide 日本',
      'green starts',
      'and goes on',
      '::endgroup::',
      'progress 100%',
      'Tests',
      'emoji 😀 and é',
      '',
      'a bell and a backspace',
      'last',
    ];
    const reference = new LineStore(new StyleTable(), 't');
    reference.append(raw);
    reference.finish();
    expect(lines(reference)).toEqual(want);
    expect(reference.markers.map((m) => [m.line, m.start, m.kind, m.name, m.collapsed])).toEqual([
      [2, true, 'group', 'Build', true],
      [6, false, 'group', '', false],
      [8, true, 'section', 'tests', true],
      [10, false, 'section', 'tests', false],
    ]);
    for (const n of [1, 2, 3, 7, 50]) {
      const table = new StyleTable();
      const s = new LineStore(table, 't');
      for (const piece of cut(raw, n)) s.append(piece);
      s.finish();
      expect(lines(s)).toEqual(want);
      expect(s.markers).toEqual(reference.markers);
      // the style carried from line 4 to 5 (green), reset on 6
      const styles = [4, 5, 6].map(
        (i) => s.lineRuns(i)?.map((x, k) => (k % 2 ? table.get(x).fg : x)) ?? null,
      );
      expect(styles).toEqual([[0, 2], [0, 2], null]);
    }
  });

  test('the chunks hold narrow text only; wide lines keep their text beside, with `\\0` in the chunks', () => {
    const s = new LineStore(new StyleTable(), 't');
    s.append('aaa\nb✓b\nccc\n');
    s.seal();
    const all = Array.from({ length: s.chunkCount }, (_, k) => s.chunk(k)).join('');
    expect(all).toBe('aaa\nb\0b\nccc\n');
    expect(s.wideCount).toBe(1);
    expect([s.wideLine(0), s.wideText(0)]).toEqual([1, 'b✓b']);
    expect(s.line(1)).toBe('b✓b');
    expect(s.lineAt(5)).toBe(1);
    expect(s.lineStart(2)).toBe(8);
  });

  test('a large fast block and lines read back from any chunk', () => {
    const s = new LineStore(new StyleTable(), 't');
    const want: string[] = [];
    for (let b = 0; b < 20; b++) {
      const block: string[] = [];
      for (let i = 0; i < 1000; i++) block.push(`block ${b} line ${i} ${'x'.repeat(i % 50)}`);
      want.push(...block);
      s.append(`${block.join('\n')}\n`);
      if (b % 3 === 0) s.seal();
    }
    expect(s.count).toBe(20_000);
    for (const i of [0, 1, 999, 1000, 12_345, 19_999]) expect(s.line(i)).toBe(want[i]);
    expect(s.chunkCount).toBeGreaterThan(1);
  });
});

describe('log model: tail first, head behind, bytes exactly once', () => {
  const enc = (s: string) => Buffer.byteLength(s);

  test('live chunks that overlap are trimmed at the byte; a gap is refused', () => {
    const m = new LogModel();
    m.begin(10);
    expect(m.headDone).toBe(false);
    expect(m.addLive('héllo\n', 10, 10 + enc('héllo\n'))).toBe(true);
    const end = m.end;
    expect(end).toBe(17);
    // a reconnection that starts again 3 bytes back (inside nothing new) and goes on
    expect(m.addLive('lo\nwörld\n', end - 3, end - 3 + enc('lo\nwörld\n'))).toBe(true);
    expect(m.addLive('already held', 10, end)).toBe(true);
    expect(m.addLive('x\n', m.end + 5, m.end + 7)).toBe(false);
    expect([m.tail.line(0), m.tail.line(1)]).toEqual(['héllo', 'wörld']);
    expect(m.end).toBe(17 + enc('wörld\n'));
  });

  test('line numbers are known once the head is in; head lines go before the tail', () => {
    const m = new LogModel();
    m.begin(enc('a\nb\n'));
    m.addLive('c\nd', m.start, m.start + 3);
    expect(m.lines).toBe(2);
    expect(m.number(0)).toBe(0);
    m.addHead('a\n', 2);
    expect(m.number(0)).toBe(1);
    expect(m.number(1)).toBe(0);
    m.addHead('b\n', 4);
    m.finishHead();
    expect(Array.from({ length: m.lines }, (_, i) => [m.number(i), m.line(i)])).toEqual([
      [1, 'a'],
      [2, 'b'],
      [3, 'c'],
      [4, 'd'],
    ]);
    expect(m.isOpen(3)).toBe(true);
    m.finish();
    expect(m.isOpen(3)).toBe(false);
    expect(m.bytes).toBe(7);
  });

  test('markers of head and tail in one order', () => {
    const m = new LogModel();
    m.begin(enc('::group::g\nx\n'));
    m.addLive('::endgroup::\n', m.start, m.start + 13);
    m.addHead('::group::g\nx\n', m.start);
    m.finishHead();
    expect(m.markers().map((k) => [k.line, k.start])).toEqual([
      [0, true],
      [2, false],
    ]);
  });
});

describe('raw bytes cut for decoding', () => {
  test('ASCII runs and each line with a high byte alone, at any alignment', () => {
    const text = 'plain one\nplain two\nwide ✓ line\nmore plain\né\n\nlast ∑ no newline';
    const all = Buffer.from(`xyz${text}`);
    for (let shift = 0; shift < 4; shift++) {
      const bytes = new Uint8Array(all.buffer, all.byteOffset + shift, all.length - shift);
      const runs = asciiRuns(bytes);
      const pieces = runs.map(([s, e, ascii]) => [Buffer.from(bytes.subarray(s, e)).toString(), ascii]);
      expect(pieces.map(([p]) => p).join('')).toBe(`xyz${text}`.slice(shift));
      expect(pieces.slice(1)).toEqual([
        ['wide ✓ line\n', false],
        ['more plain\n', true],
        ['é\n', false],
        ['\n', true],
        ['last ∑ no newline', false],
      ]);
    }
    expect(asciiRuns(Buffer.from('only ascii\n'))).toEqual([[0, 11, true]]);
    expect(asciiRuns(new Uint8Array(0))).toEqual([]);
    const long = Buffer.from(`${'a'.repeat(1001)}é`);
    expect(nextHigh(long, 0)).toBe(1001);
    expect(nextHigh(long, 1003)).toBe(-1);
  });
});
