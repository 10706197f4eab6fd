import { describe, expect, test } from '@jest/globals';
import {
  Folds,
  RowMap,
  buildSections,
  detectMarker,
  hiddenRanges,
  sectionsHiding,
  type Marker,
} from '../../src/web/islands/log/sections.ts';

function markers(lines: string[]): Marker[] {
  const out: Marker[] = [];
  lines.forEach((raw, line) => {
    // eslint-disable-next-line no-control-regex
    const m = detectMarker(raw, raw.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '').replace(/^.*\r/, ''));
    if (m !== undefined) out.push({ ...m, key: `k${line}`, line });
  });
  return out;
}

describe('log sections', () => {
  test('the markers recognised', () => {
    expect(detectMarker('::group::Build the app', '::group::Build the app')).toEqual({
      start: true,
      kind: 'group',
      name: 'Build the app',
      collapsed: true,
    });
    expect(detectMarker('::endgroup::', '::endgroup::')?.start).toBe(false);
    expect(
      detectMarker(
        '\x1b[0Ksection_start:1700000000:unit_tests[collapsed=true]\r\x1b[0KUnit tests',
        'Unit tests',
      ),
    ).toEqual({ start: true, kind: 'section', name: 'unit_tests', collapsed: true });
    expect(
      detectMarker('section_end:1700000000:unit_tests', 'section_end:1700000000:unit_tests')?.start,
    ).toBe(false);
    expect(
      detectMarker('echo ::group:: later in the line', 'echo ::group:: later in the line'),
    ).toBeUndefined();
    expect(
      detectMarker('a section_start:1:x in the middle', 'a section_start:1:x in the middle'),
    ).toBeUndefined();
  });

  test('groups do not nest; GitLab sections do, and an end closes the ones inside', () => {
    const s = buildSections(
      markers([
        '::group::one', // 0
        'x',
        '::group::two', // 2 ends one at 1
        '::endgroup::', // 3
        'section_start:1:outer', // 4
        'section_start:1:inner', // 5
        'y',
        'section_end:1:outer', // 7 ends inner too
        '::endgroup::', // 8 nothing open: ignored
        'section_start:1:open', // 9
        'z',
      ]),
    );
    expect(s.map((x) => [x.name, x.start, x.end, x.depth])).toEqual([
      ['one', 0, 1, 0],
      ['two', 2, 3, 0],
      ['outer', 4, 7, 0],
      ['inner', 5, 7, 1],
      ['open', 9, -1, 0],
    ]);
  });

  test('folds: finished groups collapse, sections follow their option, open ones stay expanded; choices win', () => {
    const lines = [
      '::group::g', // 0
      'a',
      '::endgroup::', // 2
      'section_start:1:s', // 3
      'b',
      'section_end:1:s', // 5
      'section_start:1:c[collapsed=true]', // 6
      'c',
      'section_end:1:c', // 8
      '::group::running', // 9
      'd',
    ];
    const sections = buildSections(markers(lines));
    const folds = new Folds();
    expect(sections.map((x) => folds.collapsed(x))).toEqual([true, false, true, false]);
    expect(hiddenRanges(sections, folds, lines.length)).toEqual([
      [1, 2],
      [7, 8],
    ]);
    folds.set(sections[0]!, false);
    folds.set(sections[3]!, true);
    expect(hiddenRanges(sections, folds, lines.length)).toEqual([
      [7, 8],
      [10, 10],
    ]);
    folds.setAll(false);
    expect(hiddenRanges(sections, folds, lines.length)).toEqual([]);
    folds.setAll(true);
    expect(sectionsHiding(sections, folds, 4).map((x) => x.name)).toEqual(['s']);
    expect(sectionsHiding(sections, folds, 3)).toEqual([]);
  });

  test('a collapsed section inside a collapsed one adds nothing', () => {
    const sections = buildSections(
      markers([
        'section_start:1:a',
        'section_start:1:b',
        'x',
        'section_end:1:b',
        'y',
        'section_end:1:a',
        'z',
      ]),
    );
    const folds = new Folds();
    folds.setAll(true);
    expect(hiddenRanges(sections, folds, 7)).toEqual([[1, 5]]);
  });

  test('rows <-> lines around hidden ranges', () => {
    const map = new RowMap(20, [
      [3, 5],
      [10, 14],
      [19, 25],
    ]);
    expect(map.rows).toBe(20 - 3 - 5 - 1);
    const shown = Array.from({ length: map.rows }, (_, r) => map.line(r));
    expect(shown).toEqual([0, 1, 2, 6, 7, 8, 9, 15, 16, 17, 18]);
    shown.forEach((line, r) => expect(map.row(line)).toBe(r));
    // a hidden line maps to its header's row
    expect(map.row(4)).toBe(2);
    expect(map.row(12)).toBe(6);
    expect(map.hidden(4)).toBe(true);
    expect(map.hidden(6)).toBe(false);
    const none = new RowMap(5, []);
    expect([none.rows, none.line(3), none.row(3)]).toEqual([5, 3, 3]);
  });
});
