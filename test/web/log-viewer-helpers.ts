/** What the step log viewer's browser tests read off the page: its rows, every line it holds. */
import { expect } from '@jest/globals';
import type { Page } from 'playwright-core';

/** The rows on screen: [number, text], the number of row elements, whether following. */
export async function screen(page: Page) {
  return page.evaluate(() => {
    const doc = (globalThis as any).document;
    const rows = [...doc.querySelectorAll('.lv-row')];
    const visible = rows
      .filter((r: any) => !r.hidden)
      .map((r: any) => [
        Number(r.querySelector('.lv-ln').textContent || 0),
        r.querySelector('.lv-text').textContent,
      ]);
    return {
      rows: rows.length,
      visible: visible as Array<[number, string]>,
      following: doc.querySelector('.lv-follow').getAttribute('aria-pressed') === 'true',
      state: doc.querySelector('.lv-state').textContent as string,
    };
  });
}

/** Every line the viewer holds, read by scrolling the log from top to bottom: number -> text. */
export async function readAll(page: Page): Promise<Map<number, string>> {
  const pairs: Array<[number, string]> = await page.evaluate(async () => {
    const g = globalThis as any;
    const scroller = g.document.querySelector('.lv-scroll');
    const frame = () => new Promise((r) => g.requestAnimationFrame(() => g.requestAnimationFrame(r)));
    const out: Array<[number, string]> = [];
    for (let top = 0; ; top += scroller.clientHeight - 40) {
      scroller.scrollTop = top;
      await frame();
      for (const r of g.document.querySelectorAll('.lv-row:not([hidden])'))
        out.push([Number(r.querySelector('.lv-ln').textContent), r.querySelector('.lv-text').textContent]);
      if (top >= scroller.scrollHeight - scroller.clientHeight) break;
    }
    return out;
  });
  const seen = new Map<number, string>();
  for (const [n, text] of pairs) {
    if (seen.has(n)) expect(seen.get(n)).toBe(text);
    seen.set(n, text);
  }
  return seen;
}

/** Waits until the last row on screen is line `n` or later. */
export async function waitForLine(page: Page, n: number, timeout: number): Promise<void> {
  await page.waitForFunction(
    (at: number) => {
      const rows = [...(globalThis as any).document.querySelectorAll('.lv-row:not([hidden]) .lv-ln')];
      return rows.length > 0 && Number(rows.at(-1).textContent) >= at;
    },
    n,
    { timeout },
  );
}
