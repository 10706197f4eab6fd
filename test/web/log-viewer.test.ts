/**
 * The step log viewer in Chromium, against the log contract served by bench/lib/log-stream.ts
 * (the app's CSP header, the island bundled by src/web/assets.ts) over a synthetic log of a few
 * thousand lines with ANSI colours, wide characters, `\r` progress lines, GitHub groups and
 * GitLab sections: live arrival while following, a scroll up stopping it and the Follow button
 * resuming it, a stream dropped and resumed with Last-Event-ID (the viewer's text then equals the
 * log's, every line once), the done event (no reconnection after it), a finished log opened at
 * `#L<n>` (tail first, the rest read behind), search, folding, line links, and the rules of every
 * page: no CSP violation, axe, every control reached with Tab; never more than 200 rows.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { checkPage, openBrowser, visit, watchedPage } from '../helpers/browser.ts';
import { readAll, screen } from './log-viewer-helpers.ts';
import { LogSource, feed, startLogServer, syntheticLine } from '../../bench/lib/log-stream.ts';

const SECTION_EVERY = 2000;
const line = (i: number) => syntheticLine(i, SECTION_EVERY);

/** What a line shows, worked out apart from the viewer's parser (the generator's forms only). */
function shown(raw: string): string {
  // eslint-disable-next-line no-control-regex
  const segments = raw.split('\r').map((s) => s.replace(/\x1b\[[0-9;:]*[mK]/g, ''));
  if (raw.includes('\r\x1b[0K')) return segments.at(-1)!;
  return segments.filter((s) => s !== '').at(-1) ?? '';
}

function lines(from: number, to: number): string {
  const out: string[] = [];
  for (let i = from; i < to; i++) out.push(line(i), '\n');
  return out.join('');
}

let browser: Browser;

beforeAll(async () => {
  browser = await openBrowser();
});

afterAll(async () => {
  await browser?.close();
});

describe('step log viewer', () => {
  test('live: follows, stops on a scroll up, resumes; a dropped stream resumes exactly; done', async () => {
    const source = new LogSource();
    source.append(lines(0, 600));
    const srv = await startLogServer(source, { chunkBytes: 8 * 1024 });
    const w = await watchedPage(browser);
    try {
      const res = await visit(w, `${srv.url}/log`);
      const page = w.page;
      const feeding = feed(source, { from: 600, to: 3000, perSecond: 600, line });
      // following: the last line held is on screen
      await page.waitForFunction(() => {
        const rows = [...(globalThis as any).document.querySelectorAll('.lv-row:not([hidden]) .lv-ln')];
        return rows.length > 0 && Number(rows.at(-1).textContent) > 900;
      });
      let s = await screen(page);
      expect(s.following).toBe(true);
      expect(s.rows).toBeLessThanOrEqual(200);
      const box = (await page.locator('.lv-scroll').boundingBox())!;
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page.mouse.wheel(0, -400);
      await page.waitForFunction(
        () =>
          (globalThis as any).document.querySelector('.lv-follow').getAttribute('aria-pressed') === 'false',
      );
      await page.waitForTimeout(300);
      const stopped = (await screen(page)).visible[0]![0];
      await page.waitForTimeout(700);
      s = await screen(page);
      expect(s.following).toBe(false);
      expect(s.visible[0]![0]).toBe(stopped);

      // the stream is cut (a server restart): the browser comes back with Last-Event-ID
      srv.dropStreams();
      await page.locator('.lv-follow').focus();
      await page.keyboard.press('Enter');
      await page.waitForFunction(
        () =>
          (globalThis as any).document.querySelector('.lv-follow').getAttribute('aria-pressed') === 'true',
      );
      await feeding.done;
      source.finish('failure', 2);
      await page.waitForFunction(
        () => (globalThis as any).document.querySelector('.log-viewer').dataset.status === 'failure',
        undefined,
        { timeout: 20_000 },
      );
      expect(srv.liveRequests.length).toBe(2);
      expect(srv.liveRequests[0]!.query).toBe('tail=262144');
      expect(Number(srv.liveRequests[1]!.lastEventId)).toBeGreaterThan(0);
      s = await screen(page);
      expect(s.state).toBe('3,000 lines · failure (exit code 2)');
      expect(s.following).toBe(true);
      expect(s.visible.at(-1)).toEqual([3000, shown(line(2999))]);
      expect(await page.locator('[role="status"]').textContent()).toMatch(
        /Step finished: failure \(exit code 2\)/,
      );

      // every line once, as the log has it (the groups opened first)
      await page.getByRole('button', { name: 'Expand all' }).click();
      const seen = await readAll(page);
      expect(seen.size).toBe(3000);
      for (let i = 0; i < 3000; i++)
        if (seen.get(i + 1) !== shown(line(i)))
          expect([i + 1, seen.get(i + 1)]).toBe([i + 1, shown(line(i))]);
      expect((await screen(page)).rows).toBeLessThanOrEqual(200);
      // no reconnection after done
      await page.waitForTimeout(3500);
      expect(srv.liveRequests.length).toBe(2);
      await checkPage(w, res);
    } finally {
      await w.context.close();
      await srv.close();
    }
  });

  test('a finished log: #L<n> centred and marked, search, folding, line links, keys', async () => {
    const source = new LogSource();
    source.append(lines(0, 6000));
    source.finish('success', 0);
    const srv = await startLogServer(source);
    const w = await watchedPage(browser);
    try {
      const res = await visit(w, `${srv.url}/log#L4321`);
      const page = w.page;
      // the whole log is read behind the tail, then the line is centred and marked
      await page.waitForFunction(() => {
        const doc = (globalThis as any).document;
        return (
          doc.querySelector('.lv-scroll').getAttribute('aria-busy') === 'false' &&
          doc.querySelector('.lv-marked')
        );
      });
      expect(srv.liveRequests[0]!.query).toBe('tail=262144');
      const centre = await page.evaluate(() => {
        const doc = (globalThis as any).document;
        const row = doc.querySelector('.lv-marked').getBoundingClientRect();
        const box = doc.querySelector('.lv-scroll').getBoundingClientRect();
        return {
          n: Number(doc.querySelector('.lv-marked .lv-ln').textContent),
          off: row.top + row.height / 2 - (box.top + box.height / 2),
        };
      });
      expect(centre.n).toBe(4321);
      expect(Math.abs(centre.off)).toBeLessThanOrEqual(20);

      // search: Enter goes to the next hit, Shift+Enter back
      const search = page.getByLabel('Search the log');
      await search.fill('(LINE 1234)');
      await search.press('Enter');
      await page.waitForFunction(() => (globalThis as any).document.querySelector('mark.lv-current'));
      let hit = await page.evaluate(() => {
        const doc = (globalThis as any).document;
        const mark = doc.querySelector('mark.lv-current');
        return [Number(mark.closest('.lv-row').querySelector('.lv-ln').textContent), mark.textContent];
      });
      expect(hit).toEqual([1235, '(line 1234)']);
      expect(await page.locator('.lv-count').textContent()).toBe('1 of 1');
      await search.fill('warn');
      await search.press('Enter');
      await page.waitForFunction(() => {
        const doc = (globalThis as any).document;
        return (
          doc.querySelector('mark.lv-current')?.textContent === 'warn' &&
          /^\d+ of \d+$/.test(doc.querySelector('.lv-count').textContent)
        );
      });
      const count = await page.locator('.lv-count').textContent();
      const [k, total] = count!.split(' of ').map(Number);
      await search.press('Enter');
      await expect_(page, '.lv-count', `${(k! % total!) + 1} of ${total}`);
      await search.press('Shift+Enter');
      await expect_(page, '.lv-count', `${k} of ${total}`);
      hit = await page.evaluate(() => {
        const mark = (globalThis as any).document.querySelector('mark.lv-current');
        return [mark.closest('.lv-row').querySelector('.lv-ln').textContent, mark.textContent];
      });
      expect(hit[1]).toBe('warn');

      // a line number: the address names it, the line is marked
      const link = page.locator('.lv-row:not([hidden]) a.lv-ln').nth(3);
      const n = await link.textContent();
      await link.click();
      expect(new URL(page.url()).hash).toBe(`#L${n}`);
      expect(await page.locator('.lv-marked .lv-ln').textContent()).toBe(n);

      // a finished group is collapsed; its button opens it
      await page.goto(`${srv.url}/log#L1500`);
      await expect_(page, '.lv-marked .lv-ln', '1500');
      const header = page.locator('.lv-row:not([hidden])', { hasText: '::group::Details of batch 1500' });
      const fold = header.getByRole('button', { name: 'Section Details of batch 1500' });
      expect(await fold.getAttribute('aria-expanded')).toBe('false');
      const after = async () =>
        page.evaluate(() => {
          const rows = [...(globalThis as any).document.querySelectorAll('.lv-row:not([hidden])')];
          const i = rows.findIndex((r: any) => r.textContent.includes('::group::Details of batch 1500'));
          return Number(rows[i + 1].querySelector('.lv-ln').textContent);
        });
      expect(await after()).toBe(1507);
      await fold.focus();
      await page.keyboard.press('Enter');
      while ((await fold.getAttribute('aria-expanded')) !== 'true') await page.waitForTimeout(20);
      expect(await after()).toBe(1502);

      // keys in the log: End follows, Page Up leaves the end, Home goes to the top
      await page.locator('.lv-scroll').focus();
      await page.keyboard.press('End');
      await page.waitForFunction(() => {
        const rows = [...(globalThis as any).document.querySelectorAll('.lv-row:not([hidden]) .lv-ln')];
        return rows.at(-1).textContent === '6000';
      });
      await page.keyboard.press('PageUp');
      await page.waitForFunction(
        () =>
          (globalThis as any).document.querySelector('.lv-follow').getAttribute('aria-pressed') === 'false',
      );
      await page.keyboard.press('Home');
      await page.waitForFunction(
        () => (globalThis as any).document.querySelector('.lv-row:not([hidden]) .lv-ln').textContent === '1',
      );
      expect((await screen(page)).rows).toBeLessThanOrEqual(200);
      await checkPage(w, res);
    } finally {
      await w.context.close();
      await srv.close();
    }
  });
});

/** Waits until the element's text is `text`. */
async function expect_(page: Page, selector: string, text: string): Promise<void> {
  await page.waitForFunction(
    ([sel, t]) => (globalThis as any).document.querySelector(sel)?.textContent === t,
    [selector, text] as const,
  );
}
