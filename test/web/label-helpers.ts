/** What the browser tests of labels share: the label form, a label's row, the chips' contrast. */
import { expect } from '@jest/globals';
import type { Locator } from 'playwright-core';
import type { Watched } from '../helpers/browser.ts';

/** Fills the label form on the page (new or edit). */
export async function fillLabel(
  w: Watched,
  l: { name: string; color: string; description?: string },
): Promise<void> {
  await w.page.getByLabel('Name', { exact: true }).fill(l.name);
  await w.page.getByLabel('Colour', { exact: true }).fill(l.color);
  if (l.description !== undefined)
    await w.page.getByLabel('Description', { exact: true }).fill(l.description);
}

/** The row of the label named exactly `name` in a label table. */
export function labelRow(w: Watched, name: string): Locator {
  return w.page
    .locator('table.labels tbody tr')
    .filter({ has: w.page.locator('th .label-chip').getByText(name, { exact: true }) });
}

/** The WCAG contrast of `rgb(r, g, b)` text on `#rrggbb`. */
function contrast(rgb: string, hex: string): number {
  const lum = (c: number[]) => {
    const [r, g, b] = c.map((v) => {
      const s = v / 255;
      return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
  };
  const text = lum((/\d+, \d+, \d+/.exec(rgb)?.[0] ?? '').split(', ').map(Number));
  const bg = lum([1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
  const [hi, lo] = text > bg ? [text, bg] : [bg, text];
  return (hi + 0.05) / (lo + 0.05);
}

/**
 * Every label chip on the page: its text's colour as the browser computes it on the colour its
 * SVG paints has a contrast of at least 4.5:1 (axe cannot measure text over an SVG). Answers the
 * chips seen, `name: color`.
 */
export async function expectChipContrast(w: Watched): Promise<string[]> {
  const chips = await w.page.evaluate(() =>
    [...(globalThis as any).document.querySelectorAll('.label-chip')].map((el: any) => ({
      name: String(el.textContent),
      text: String((globalThis as any).getComputedStyle(el).color),
      fill: String(el.querySelector('svg.label-fill rect')?.getAttribute('fill')),
    })),
  );
  const low = chips
    .map((c) => ({ ...c, ratio: contrast(c.text, c.fill) }))
    .filter((c) => !(c.ratio >= 4.5))
    .map((c) => `${c.name} (${c.text} on ${c.fill}): ${c.ratio.toFixed(2)}`);
  expect({ url: w.page.url(), low }).toEqual({ url: w.page.url(), low: [] });
  return chips.map((c) => `${c.name}: ${c.fill}`);
}
