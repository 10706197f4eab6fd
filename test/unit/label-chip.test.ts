/**
 * The label chip's text colour: black or white, whichever contrasts more with the label's colour,
 * never below WCAG AA's 4.5:1 over the whole colour cube; and the chip's markup escapes the name.
 */
import { describe, expect, test } from '@jest/globals';
import { inkFor, labelChip, luminance } from '../../src/web/views/labels.ts';

const hex = (r: number, g: number, b: number) =>
  `#${[r, g, b].map((c) => c.toString(16).padStart(2, '0')).join('')}`;

describe('label chips', () => {
  test('when any colour is chosen, then the text on it contrasts at least 4.5:1', () => {
    let worst = Infinity;
    const steps = [...Array.from({ length: 52 }, (_, i) => i * 5), 255];
    for (const r of steps)
      for (const g of steps)
        for (const b of steps) {
          const color = hex(r, g, b);
          const l = luminance(color);
          const ratio = inkFor(color) === 'dark' ? (l + 0.05) / 0.05 : 1.05 / (l + 0.05);
          worst = Math.min(worst, ratio);
        }
    expect(worst).toBeGreaterThanOrEqual(4.5);
    expect(inkFor('#ffffff')).toBe('dark');
    expect(inkFor('#000000')).toBe('light');
    expect(inkFor('#FBCA04')).toBe('dark');
    expect(inkFor('#5319e7')).toBe('light');
  });

  test('when a name holds markup, then the chip shows it as text on its colour', () => {
    expect(labelChip({ name: '<b>"x"</b>', color: '#5319e7' }).text).toBe(
      '<span class="label-chip ink-light"><svg class="label-fill" aria-hidden="true" focusable="false" viewBox="0 0 1 1" preserveAspectRatio="none"><rect width="1" height="1" fill="#5319e7"/></svg>&lt;b&gt;&quot;x&quot;&lt;/b&gt;</span>',
    );
  });
});
