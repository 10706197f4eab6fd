/**
 * A diff page (a changeset, a pull request's files) measured in Debian's Chromium
 * (playwright-core): when its first file is on screen, and the main thread's long tasks from
 * the navigation to a second after the load.
 */
import { chromium } from 'playwright-core';

export type BrowserFigures = {
  version: string;
  /** Milliseconds from the navigation start to the first frame showing the first file's diff. */
  firstFileMs: number;
  loadMs: number;
  longestTaskMs: number;
  /** Tasks over 50 ms. */
  longTasks: number;
  /** Files shown collapsed (behind "Load diff"). */
  collapsed: number;
};

/** The first file's diff block on a diff page (see src/web/views/code/diff.ts). */
export const FIRST_FILE = '.diff-file';

export async function browserDiffPage(url: string): Promise<BrowserFigures> {
  const browser = await chromium.launch({
    executablePath: process.env.TRIAD_CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
  try {
    const runs: BrowserFigures[] = [];
    for (let i = 0; i < 3; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      await page.addInitScript((selector: string) => {
        const g = globalThis as any;
        g.__tasks = [] as number[];
        new g.PerformanceObserver((list: any) => {
          for (const e of list.getEntries()) g.__tasks.push(e.duration);
        }).observe({ type: 'longtask', buffered: true });
        // the first frame after the first file's block is in the document
        const seen = () => {
          if (g.__first !== undefined) return;
          if (g.document.querySelector(selector) !== null) {
            g.requestAnimationFrame(() => g.requestAnimationFrame(() => (g.__first ??= g.performance.now())));
          } else g.requestAnimationFrame(seen);
        };
        g.requestAnimationFrame(seen);
      }, FIRST_FILE);
      await page.goto(url, { waitUntil: 'load' });
      await page.waitForTimeout(1000);
      const f = await page.evaluate(() => {
        const g = globalThis as any;
        const nav = g.performance.getEntriesByType('navigation')[0];
        return {
          first: g.__first as number,
          load: nav.loadEventEnd as number,
          tasks: g.__tasks as number[],
          collapsed: g.document.querySelectorAll('button.load-diff').length as number,
        };
      });
      runs.push({
        version: browser.version(),
        firstFileMs: f.first,
        loadMs: f.load,
        longestTaskMs: Math.max(0, ...f.tasks),
        longTasks: f.tasks.length,
        collapsed: f.collapsed,
      });
      await context.close();
    }
    // the median run by first-file time
    runs.sort((a, b) => a.firstFileMs - b.firstFileMs);
    return runs[1]!;
  } finally {
    await browser.close();
  }
}
