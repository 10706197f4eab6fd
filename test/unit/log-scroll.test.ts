import { describe, expect, test } from '@jest/globals';
import * as S from '../../src/web/islands/log/scroll.ts';

describe('log scroll mapping', () => {
  test('below the cap the mapping is the identity', () => {
    const g = { rows: 1000, rowHeight: 20, viewport: 600 };
    expect(S.scaled(g)).toBe(false);
    expect(S.spacerHeight(g)).toBe(20_000);
    expect(S.maxTop(g)).toBe(19_400);
    for (const top of [0, 1, 555.5, 19_400]) {
      expect(S.toScroll(g, top)).toBeCloseTo(top);
      expect(S.fromScroll(g, top)).toBeCloseTo(top);
    }
    expect(S.toScroll(g, 1e9)).toBe(19_400);
  });

  test('a million and more rows: the spacer is capped and the scrollbar reaches the last row', () => {
    for (const rows of [1_000_000, 5_000_000]) {
      const g = { rows, rowHeight: 20, viewport: 630 };
      expect(S.scaled(g)).toBe(true);
      expect(S.spacerHeight(g)).toBe(S.CAP);
      expect(S.CAP).toBeLessThan(17_895_697);
      expect(S.toScroll(g, S.maxTop(g))).toBeCloseTo(S.maxScroll(g));
      expect(S.fromScroll(g, S.maxScroll(g))).toBeCloseTo(S.maxTop(g));
      const last = S.visibleRows(g, S.fromScroll(g, S.maxScroll(g)));
      expect(last.first + last.count).toBe(rows);
      // round trips
      for (const top of [0, 12_345.5, S.maxTop(g) / 3])
        expect(S.fromScroll(g, S.toScroll(g, top))).toBeCloseTo(top, 3);
    }
  });

  test('moves by wheel and keys are exact pixels of content, not of the scaled scrollbar', () => {
    const g = { rows: 1_000_000, rowHeight: 20, viewport: 630 };
    const top = S.centreTop(g, 777_750);
    expect(S.visibleRows(g, top + S.wheelPixels(3, 1, 20, 630)).first).toBe(S.visibleRows(g, top).first + 3);
    expect(S.wheelPixels(100, 0, 20, 630)).toBe(100);
    expect(S.wheelPixels(1, 2, 20, 630)).toBe(630);
    expect(S.keyMove('ArrowDown', false, 20, 630)).toBe(40);
    expect(S.keyMove('PageUp', false, 20, 630)).toBe(-610);
    expect(S.keyMove(' ', true, 20, 630)).toBe(-610);
    expect(S.keyMove('End', false, 20, 630)).toBe('end');
    expect(S.keyMove('x', false, 20, 630)).toBeUndefined();
  });

  test('the rows drawn, centring and the end', () => {
    const g = { rows: 100, rowHeight: 20, viewport: 105 };
    expect(S.visibleRows(g, 0)).toEqual({ first: 0, count: 6, offset: 0 });
    expect(S.visibleRows(g, 30)).toEqual({ first: 1, count: 6, offset: 10 });
    const c = S.centreTop(g, 50);
    const w = S.visibleRows(g, c);
    expect(50 * 20 + 10 - c).toBeCloseTo(52.5);
    expect(w.first).toBeLessThan(50);
    expect(S.centreTop(g, 0)).toBe(0);
    expect(S.centreTop(g, 99)).toBe(S.maxTop(g));
    expect(S.atEnd(g, S.maxTop(g))).toBe(true);
    expect(S.atEnd(g, S.maxTop(g) - 20)).toBe(false);
    // fewer rows than the viewport holds
    const few = { rows: 3, rowHeight: 20, viewport: 600 };
    expect(S.maxTop(few)).toBe(0);
    expect(S.visibleRows(few, 0)).toEqual({ first: 0, count: 3, offset: 0 });
    expect(S.atEnd(few, 0)).toBe(true);
    expect(S.visibleRows({ rows: 0, rowHeight: 20, viewport: 600 }, 0).count).toBe(0);
  });
});
