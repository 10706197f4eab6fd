/**
 * Markup where a pull request puts text (its title, description and comments, the names of its
 * source and target, commit messages, file names, conflicted files) shows as text on every pull
 * request page: no dialog, no CSP violation, no page error, no element made of it. Git (a branch
 * name with markup) and Mercurial (a bookmark named like a script element).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, signIn, visit, watchedPage, type Watched } from '../helpers/browser.ts';
import { MAINLINE, PrRepo } from '../helpers/pulls.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { pullWorld, settledBox, type PullWorld } from './pulls-fixture.ts';

const SCRIPT = '<script>alert(1)</script>';
const IMG = '<img src=x onerror=alert(1)>';
const FILE = `${IMG}.txt`;
const BODY = `# Corpus

${SCRIPT}
${IMG}
<a href="javascript:alert(1)">raw link</a>

[js link](javascript:alert(1)) ![ext](https://example.invalid/x.png)
`;
const SOURCES: Record<'git' | 'hg', string> = { git: 'x"><img-src=x-onerror=alert(1)>', hg: SCRIPT };

let browser: Browser;
let ts: TestServer;
let W: PullWorld;

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  W = await pullWorld(ts);
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

/** Nothing on the page was made of the hostile text: no script, image or link to `javascript:`. */
async function expectInert(w: Watched): Promise<void> {
  const made = await w.page.evaluate(() => {
    const main = (globalThis as any).document.querySelector('main');
    return main.querySelectorAll('script, img[src="x"], svg, i[onmouseover], a[href^="javascript:"]').length;
  });
  expect(made).toBe(0);
  expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
}

describe.each(['git', 'hg'] as const)(
  'hostile text in %s pull requests',
  (kind: VcsKind & ('git' | 'hg')) => {
    test('shows as text on the list, new, conversation, commits, files and file pages', async () => {
      const repo = await PrRepo.create(W.owner, W.org, kind);
      const source = SOURCES[kind];
      await repo.commitOn(source, { [FILE]: `${SCRIPT}\n</code></pre>${IMG}\n` }, `${SCRIPT} subject`);
      await repo.commitOn(MAINLINE[kind], { [FILE]: 'the mainline\n' }, 'mainline');
      const pr = await W.owner.client.post(`${repo.api}/pulls`, {
        title: SCRIPT,
        body: BODY,
        source_ref: source,
      });
      expect(pr.status).toBe(201);
      const n = pr.body.data.number;
      expect(
        (await W.owner.client.post(`${repo.api}/pulls/${n}/comments`, { body: `${IMG} ${SCRIPT}` })).status,
      ).toBe(201);
      const base = `${ts.url}/${W.org}/${repo.name}`;
      const w = await watchedPage(browser);
      await signIn(w, ts.url, W.ownerWeb, `/${W.org}/${repo.name}/-/pulls`);
      expect(await w.page.locator('.pr-title').allTextContents()).toEqual([SCRIPT]);
      await expectInert(w);

      await visit(w, `${base}/-/pulls/${n}`);
      expect(await settledBox(w)).toBe('Merge Conflicts');
      expect(await w.page.locator('ul.conflicts li').allTextContents()).toEqual([FILE]);
      expect(await w.page.locator('.pr-head h1').textContent()).toBe(`${SCRIPT} #${n}`);
      expect(await w.page.locator('.pr-head .badge.branch').first().textContent()).toBe(source);
      expect(await w.page.locator('.comment .markdown').last().textContent()).toContain(IMG);
      await expectInert(w);
      await checkPage(w, await visit(w, `${base}/-/pulls/${n}`), { keyboard: false });

      const pages = [
        `/-/pulls/${n}/commits`,
        `/-/pulls/${n}/files`,
        `/-/pulls/new?source=${encodeURIComponent(source)}`,
      ];
      for (const path of pages) {
        await checkPage(w, await visit(w, `${base}${path}`), { keyboard: false });
        await expectInert(w);
      }
      expect(await w.page.locator('.diff-list li a').allTextContents()).toEqual([FILE]);
      expect(await w.page.locator('ol.commits .subject').allTextContents()).toEqual([`${SCRIPT} subject`]);
      const { base_commit, head_commit } = (await W.owner.client.get(`${repo.api}/pulls/${n}`)).body.data;
      await visit(
        w,
        `${base}/-/compare/${base_commit}...${head_commit}/file/0?back=${encodeURIComponent(BODY)}`,
      );
      expect(await w.page.locator('main h2').textContent()).toBe(FILE);
      // a `back` that is not a page of this repository's pull requests gives no link
      expect(await w.page.getByText('All changed files').count()).toBe(0);
      await expectInert(w);
      await w.context.close();
    });
  },
);
