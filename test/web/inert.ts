/**
 * The XSS tests' check: markup that users put in repositories, issues and forms made no element
 * of its own on the page, and nothing ran.
 */
import { expect } from '@jest/globals';
import type { Watched } from '../helpers/browser.ts';

/** No element was made of the markup: no script in main, no `img[src=x]`, no `svg`, no javascript: link. */
export async function expectInert(w: Watched): Promise<void> {
  const made = await w.page.evaluate(() => {
    const doc = (globalThis as any).document;
    return {
      scripts: doc.querySelectorAll('main script').length,
      img: doc.querySelectorAll('img[src="x"], svg, i[onmouseover]').length,
      handlers: [...doc.querySelectorAll('main *')].filter((el: any) =>
        [...el.attributes].some((a: any) => a.name.startsWith('on')),
      ).length,
      jsLinks: doc.querySelectorAll('a[href^="javascript"], a[href^="vbscript"], a[href^="data"]').length,
    };
  });
  expect({ url: w.page.url(), ...made }).toEqual({
    url: w.page.url(),
    scripts: 0,
    img: 0,
    handlers: 0,
    jsLinks: 0,
  });
  expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
}
