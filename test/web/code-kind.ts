/**
 * The code pages of one repository kind in a real browser (Mercurial and Fossil; Git has its own
 * file with more): home, clone again, tree, file, raw, log, changeset, ref switcher, the empty
 * repository and the pages without script.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, visit, watchedPage } from '../helpers/browser.ts';
import { newRepo } from '../helpers/factories.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import {
  cloneAgain,
  expectHome,
  MAIN_PY_2,
  PNG,
  pushedRepo,
  textOf,
  world,
  type Pushed,
  type World,
} from './code-fixture.ts';

export function kindSuite(vcs: VcsKind, opts: { emptyCommands: string[]; refs: string[] }): void {
  let browser: Browser;
  let ts: TestServer;
  let W: World;
  let P: Pushed;
  let base: string;
  const def = vcs === 'hg' ? 'default' : 'trunk';

  beforeAll(async () => {
    [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
    W = await world(ts);
    P = await pushedRepo(W, vcs);
    base = `${ts.url}/${W.org}/${P.repo.name}`;
  });
  afterAll(async () => {
    await browser?.close();
    await ts?.close();
  });

  describe(`a ${vcs} repository`, () => {
    test('the home shows the README and the clone URL, which still clones', async () => {
      const w = await watchedPage(browser);
      const res = await visit(w, base);
      await expectHome(w, P);
      expect(await textOf(w, '.last-commit .subject')).not.toBe('');
      await checkPage(w, res, { keyboard: false });
      expect(await cloneAgain(vcs, P.repo.clone, W.owner.token)).toContain('# Hello Triad');
      await w.context.close();
    });

    test('the tree, a highlighted file with its line range, and the raw bytes', async () => {
      const w = await watchedPage(browser);
      await visit(w, `${base}/-/tree/${def}/docs/deep`);
      expect(await w.page.locator('nav.crumbs li').allTextContents()).toEqual([P.repo.name, 'docs', 'deep']);
      expect(await w.page.locator('table.tree td.name a').allTextContents()).toEqual(['..', 'nested/']);
      await visit(w, `${base}/-/tree/feature/x/src`);
      expect(await w.page.locator('table.tree td.name a').allTextContents()).toEqual([
        '..',
        'feature.py',
        'main.py',
      ]);
      await visit(w, `${base}/-/blob/${def}/src/main.py#L2-L3`);
      expect(await w.page.locator('.code-view .hljs-keyword').count()).toBeGreaterThan(0);
      await w.page.waitForSelector('#L3.hl');
      expect(await w.page.locator('.l.hl').count()).toBe(2);
      const off = await watchedPage(browser, { javaScript: false });
      await visit(off, `${base}/-/blob/${def}/src/main.py#L2`);
      expect(await off.page.evaluate(() => (globalThis as any).document.querySelector(':target')?.id)).toBe(
        'L2',
      );
      await off.context.close();
      const r = await fetch(`${base}/-/raw/${def}/src/main.py`);
      expect([r.status, await r.text()]).toEqual([200, MAIN_PY_2]);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
      const png = await fetch(`${base}/-/raw/${P.c1}/img/logo.png?download=1`);
      expect(png.headers.get('content-type')).toBe('application/octet-stream');
      expect(png.headers.get('content-disposition')).toMatch(/^attachment;/);
      expect(Buffer.from(await png.arrayBuffer()).equals(PNG)).toBe(true);
      await w.context.close();
    });

    test('the history lists both commits, and the changeset of the second its diff', async () => {
      const w = await watchedPage(browser);
      await visit(w, `${base}/-/log`);
      const subjects = await w.page.locator('li.commit .subject a').allTextContents();
      expect(subjects).toEqual(expect.arrayContaining(['Second commit', 'First commit']));
      expect(subjects.indexOf('Second commit')).toBeLessThan(subjects.indexOf('First commit'));
      await visit(w, `${base}/-/changeset/${P.c2}`);
      expect(await textOf(w, 'h1.subject')).toBe('Second commit');
      expect(await w.page.locator('table.diff tr.add').allTextContents()).toEqual(['2+    answer = 42']);
      expect(await w.page.locator('table.diff tr.del').allTextContents()).toEqual(['2-    answer = 41']);
      await w.context.close();
    });

    test('the ref switcher lists the branch, the tag (and bookmark)', async () => {
      const w = await watchedPage(browser);
      await visit(w, `${base}/-/blob/${def}/src/main.py`);
      await w.page.locator('details.ref-switch summary').click();
      const names = await w.page.locator('details.ref-switch .ref-list a').allTextContents();
      expect(names).toEqual(expect.arrayContaining([def, 'feature/x', 'v1.0', ...opts.refs]));
      await w.page.locator('details.ref-switch').getByRole('link', { name: 'v1.0' }).click();
      expect(new URL(w.page.url()).pathname).toBe(`/${W.org}/${P.repo.name}/-/blob/v1.0/src/main.py`);
      expect(await w.page.locator('.code-view').textContent()).toContain('answer = 42');
      await visit(w, `${base}/-/refs`);
      expect(await w.page.locator('table.refs td:first-child a').allTextContents()).toEqual(
        expect.arrayContaining([def, 'feature/x', 'v1.0', ...opts.refs]),
      );
      await w.context.close();
    });

    test('read pages render without script', async () => {
      const w = await watchedPage(browser, { javaScript: false });
      for (const path of [
        '',
        `/-/tree/${def}/src`,
        `/-/blob/${def}/src/main.py`,
        '/-/log',
        `/-/changeset/${P.c2}`,
      ]) {
        await visit(w, `${base}${path}`);
        expect(await w.page.locator('main').textContent()).not.toBe('');
      }
      expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
      await w.context.close();
    });

    test('an empty repository shows the commands of its first push', async () => {
      const repo = await newRepo(W.owner, W.org, { vcs });
      const w = await watchedPage(browser);
      await visit(w, `${ts.url}/${W.org}/${repo.name}`);
      expect(await textOf(w, '.empty-repo h2')).toBe('This repository is empty');
      const cmds = await textOf(w, '.empty-repo pre');
      for (const c of opts.emptyCommands) expect(cmds).toContain(c.replace('URL', repo.clone));
      await w.context.close();
    });
  });
}
