import { describe, expect, test } from '@jest/globals';
import {
  BOLD,
  DEFAULT,
  INVERSE,
  ITALIC,
  StyleTable,
  TRUE,
  UNDERLINE,
  applySgr,
  nearest256,
  parseLine,
  xterm,
} from '../../src/web/islands/log/ansi.ts';

/** The runs of a parsed line as [text, style] pieces. */
function pieces(raw: string, start = 0, table = new StyleTable()) {
  const p = parseLine(raw, start, table);
  const runs = p.runs ?? [0, 0];
  const out: Array<[string, { fg: number; bg: number; flags: number }]> = [];
  for (let i = 0; i < runs.length; i += 2) {
    const end = i + 2 < runs.length ? runs[i + 2]! : p.text.length;
    out.push([p.text.slice(runs[i], end), table.get(runs[i + 1]!)]);
  }
  return { text: p.text, out, end: table.get(p.end) };
}

const plain = { fg: DEFAULT, bg: DEFAULT, flags: 0 };

describe('ANSI lines', () => {
  test('plain text passes as it is, without runs', () => {
    const t = new StyleTable();
    expect(parseLine('hello\tworld', 0, t)).toEqual({ text: 'hello\tworld', runs: null, end: 0 });
  });

  test('16 colours, bright colours, bold, italic, underline and reset', () => {
    const r = pieces('a\x1b[31mred\x1b[1;94mblue\x1b[0m \x1b[3;4mi\x1b[23;24mn');
    expect(r.text).toBe('aredblue in');
    expect(r.out).toEqual([
      ['a', plain],
      ['red', { fg: 1, bg: DEFAULT, flags: 0 }],
      ['blue', { fg: 12, bg: DEFAULT, flags: BOLD }],
      [' ', plain],
      ['i', { fg: DEFAULT, bg: DEFAULT, flags: ITALIC | UNDERLINE }],
      ['n', plain],
    ]);
  });

  test('256 colours and 24-bit colours, in the semicolon and the colon forms', () => {
    const r = pieces('\x1b[38;5;208mx\x1b[48;2;1;2;3my\x1b[38:2::10:20:30mz\x1b[38:5:42mw\x1b[39;49mv');
    expect(r.out).toEqual([
      ['x', { fg: 208, bg: DEFAULT, flags: 0 }],
      ['y', { fg: 208, bg: TRUE + 0x010203, flags: 0 }],
      ['z', { fg: TRUE + 0x0a141e, bg: TRUE + 0x010203, flags: 0 }],
      ['w', { fg: 42, bg: TRUE + 0x010203, flags: 0 }],
      ['v', plain],
    ]);
  });

  test('an empty SGR resets; inverse and its end', () => {
    const t = new StyleTable();
    const red = applySgr(t, 0, '31;7');
    expect(t.get(red)).toEqual({ fg: 1, bg: DEFAULT, flags: INVERSE });
    expect(applySgr(t, red, '')).toBe(0);
    expect(t.get(applySgr(t, red, '27'))).toEqual({ fg: 1, bg: DEFAULT, flags: 0 });
    // malformed extended colours change nothing
    expect(applySgr(t, 0, '38;5;300')).toBe(0);
    expect(applySgr(t, 0, '38;2;1;2')).toBe(0);
  });

  test('the style carries over to the next line, as in a terminal', () => {
    const t = new StyleTable();
    const first = parseLine('\x1b[32mgreen', 0, t);
    const next = pieces('still', first.end, t);
    expect(next.out).toEqual([['still', { fg: 2, bg: DEFAULT, flags: 0 }]]);
    expect(parseLine('more', first.end, t).runs).toEqual([0, first.end]);
  });

  test('other escapes and control characters are dropped', () => {
    expect(
      parseLine(
        'a\x1b[2Jb\x1b[10;20Hc\x1b]0;title\x07d\x1b]8;;http://x\x1b\\e\x1b(Bf\x07g\x08h',
        0,
        new StyleTable(),
      ).text,
    ).toBe('abcdefgh');
    // an escape cut off at the end of the line
    expect(parseLine('ab\x1b[3', 0, new StyleTable()).text).toBe('ab');
    expect(parseLine('ab\x1b]0;unterminated', 0, new StyleTable()).text).toBe('ab');
  });

  test('a carriage return shows the last state of the line', () => {
    const t = new StyleTable();
    expect(parseLine('10%\r50%\r100%', 0, t).text).toBe('100%');
    expect(parseLine('done\r', 0, t).text).toBe('done');
    expect(parseLine('text\r\r', 0, t).text).toBe('text');
    // GitLab's section lines: erase after the return, then the header (or nothing)
    expect(parseLine('\x1b[0Ksection_start:1:build\r\x1b[0KBuilding', 0, t).text).toBe('Building');
    expect(parseLine('\x1b[0Ksection_end:1:build\r\x1b[0K', 0, t).text).toBe('');
    expect(parseLine('abc\x1b[2Kdef', 0, t).text).toBe('def');
    const r = pieces('\x1b[31mold\r\x1b[32mnew', 0, t);
    expect(r.out).toEqual([['new', { fg: 2, bg: DEFAULT, flags: 0 }]]);
  });

  test('the xterm palette and the nearest entry of a 24-bit colour', () => {
    expect(xterm(16)).toBe(0x000000);
    expect(xterm(196)).toBe(0xff0000);
    expect(xterm(231)).toBe(0xffffff);
    expect(xterm(232)).toBe(0x080808);
    expect(nearest256(0xff0000)).toBe(196);
    expect(nearest256(0x808080)).toBe(244);
    expect(nearest256(0x5f87af)).toBe(67);
  });
});
