/**
 * The pull request pages of one repository kind in a real browser, with a source pushed by the
 * stock client: open one from the new pull request page (its compare first), read its
 * conversation, commits and files, comment, merge; a conflicting one lists its file and a forced
 * merge says why it was refused; a viewer who may not change it sees no buttons and a forced POST
 * is a 403 page; the read pages without script. checkPage (CSP, axe, keyboard) on each page.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, screenshot, signIn, visit, watchedPage } from '../helpers/browser.ts';
import { MAINLINE, PrRepo } from '../helpers/pulls.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { forcePost, pullWorld, settledBox, textOf, type PullWorld } from './pulls-fixture.ts';

export function pullSuite(kind: VcsKind): void {
  let browser: Browser;
  let ts: TestServer;
  let W: PullWorld;
  let repo: PrRepo;
  let base: string;
  const main = MAINLINE[kind];

  beforeAll(async () => {
    [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
    W = await pullWorld(ts);
    repo = await PrRepo.create(W.owner, W.org, kind);
    await repo.commitOn('feature', { 'src/a.txt': 'alpha\n' }, 'Add a');
    await repo.commitOn('feature', { README: 'hello\nworld\n' }, 'Extend the readme');
    await repo.commitOn('clash', { 'c.txt': 'from clash\n' }, 'Clash side');
    await repo.commitOn(main, { 'c.txt': 'from the mainline\n' }, 'Mainline side');
    base = `${ts.url}/${W.org}/${repo.name}`;
  });
  afterAll(async () => {
    await browser?.close();
    await ts?.close();
  });

  describe(`${kind} pull requests`, () => {
    test('a member opens one from the page, reads its commits and files, comments and merges it', async () => {
      const w = await watchedPage(browser);
      await signIn(w, ts.url, W.ownerWeb, `/${W.org}/${repo.name}/-/pulls`);
      expect(await textOf(w, 'main .empty')).toBe('No open pull requests.');
      await checkPage(w, await visit(w, `${base}/-/pulls`));
      await w.page.getByRole('link', { name: 'New pull request' }).click();
      expect(await w.page.getByLabel('Into (target)').inputValue()).toBe(main);
      await w.page.getByLabel('From (source)').selectOption('feature');
      await w.page.getByRole('button', { name: 'Compare' }).click();
      expect(await w.page.locator('ol.commits .subject').allTextContents()).toEqual([
        'Add a',
        'Extend the readme',
      ]);
      expect(await w.page.locator('.diff-list li a').allTextContents()).toEqual(['README', 'src/a.txt']);
      const compare = await visit(w, w.page.url());
      await checkPage(w, compare);
      await w.page.getByLabel('Title').fill('Feature work');
      await w.page.getByLabel('Description', { exact: true }).fill('Adds **alpha** and a [link](src/a.txt).');
      await w.page.getByRole('button', { name: 'Open pull request' }).click();
      await w.page.waitForURL(/\/-\/pulls\/1$/);
      expect(await textOf(w, '.pr-head h1')).toBe('Feature work #1');
      expect(await textOf(w, '.pr-body .markdown strong')).toBe('alpha');
      expect(await settledBox(w)).toBe('Merge Can be merged');
      await checkPage(w, await visit(w, `${base}/-/pulls/1`));
      if (kind === 'git') await screenshot(w, 'pull-request');

      await w.page.getByRole('link', { name: /^Commits/ }).click();
      expect(await w.page.locator('ol.commits .subject').allTextContents()).toEqual([
        'Add a',
        'Extend the readme',
      ]);
      await checkPage(w, await visit(w, w.page.url()));
      await w.page.getByRole('link', { name: 'Files changed' }).click();
      expect(await w.page.locator('table.diff tr.add').allTextContents()).toEqual(['2+world', '1+alpha']);
      await checkPage(w, await visit(w, w.page.url()));
      if (kind === 'git') await screenshot(w, 'pull-files');

      await visit(w, `${base}/-/pulls/1`);
      await w.page.getByLabel('Add a comment', { exact: true }).fill('Looks *good*');
      await w.page.getByRole('button', { name: 'Comment' }).click();
      expect(await textOf(w, '.comment:last-of-type .markdown em')).toBe('good');
      await w.page.getByLabel('Add a comment', { exact: true }).fill('   ');
      await w.page.getByRole('button', { name: 'Comment' }).click();
      expect(await textOf(w, '.flash.error')).toContain('must not be empty');

      await visit(w, `${base}/-/pulls/1`);
      await settledBox(w);
      await w.page.getByLabel(/^Squash/).check();
      await w.page.getByRole('button', { name: 'Merge pull request' }).click();
      await w.page.waitForURL(/\/-\/pulls\/1$/);
      expect(await textOf(w, '.pr-head .badge')).toBe('Merged');
      expect(await textOf(w, '.flash.ok')).toMatch(/^Merged .* as [0-9a-f]{10,12}\.$/);
      expect(await w.page.locator('section.merge-box').count()).toBe(0);
      await visit(w, `${base}/-/pulls?status=merged`);
      expect(await w.page.locator('.pr-list .pr-title').allTextContents()).toEqual(['Feature work']);
      // the merged one keeps its files, the mainline has the change
      await visit(w, `${base}/-/pulls/1/files`);
      expect(await w.page.locator('.diff-list li a').allTextContents()).toEqual(['README', 'src/a.txt']);
      expect(await repo.fileAt(W.owner.client, main, 'src/a.txt')).toBe('alpha\n');
      await w.context.close();
    });

    test('a conflicting one lists its file, and a forced merge says why it was refused', async () => {
      const pr = await W.owner.client.post(`${repo.api}/pulls`, { title: 'Clash', source_ref: 'clash' });
      expect(pr.status).toBe(201);
      const n = pr.body.data.number;
      const w = await watchedPage(browser);
      await signIn(w, ts.url, W.ownerWeb, `/${W.org}/${repo.name}/-/pulls/${n}`);
      expect(await settledBox(w)).toBe('Merge Conflicts');
      expect(await w.page.locator('ul.conflicts li').allTextContents()).toEqual(['c.txt']);
      expect(await w.page.getByRole('button', { name: 'Merge pull request' }).count()).toBe(0);
      await checkPage(w, await visit(w, `${base}/-/pulls/${n}`));
      const status = await forcePost(w, `/${W.org}/${repo.name}/-/pulls/${n}/merge`, { style: 'merge' });
      expect(status).toBe(409);
      expect(await textOf(w, '.flash.error')).toBe(
        'Not merged: the merge conflicts in this file: c.txt. Resolve them on the source and push it again.',
      );
      // the owner may close and reopen it
      await w.page.getByRole('button', { name: 'Close pull request' }).click();
      expect(await textOf(w, '.pr-head .badge')).toBe('Closed');
      await w.page.getByRole('button', { name: 'Reopen pull request' }).click();
      expect(await textOf(w, '.pr-head .badge')).toBe('Open');
      // (the browser itself refuses an empty title: a forced one is shown again with the reason)
      const blank = { form: 'edit', title: ' ', body: 'kept' };
      expect(await forcePost(w, `/${W.org}/${repo.name}/-/pulls/${n}/edit`, blank)).toBe(400);
      expect(await textOf(w, '.flash.error')).toBe('form.title: must not be empty');
      expect(await w.page.getByLabel('Description', { exact: true }).inputValue()).toBe('kept');
      await w.page.getByLabel('Title').fill('Clash, renamed');
      await w.page.getByRole('button', { name: 'Save' }).click();
      expect(await textOf(w, '.pr-head h1')).toBe(`Clash, renamed #${n}`);
      await w.context.close();
    });

    test('a viewer who may not change it sees no buttons, and a forced POST is a 403 page', async () => {
      const w = await watchedPage(browser);
      await signIn(w, ts.url, W.outsiderWeb, `/${W.org}/${repo.name}/-/pulls/2`);
      expect(await w.page.getByText('Edit title and description').count()).toBe(0);
      expect(
        await w.page.getByRole('button', { name: /Close pull request|Merge pull request/ }).count(),
      ).toBe(0);
      expect(await textOf(w, 'section.merge-box')).toContain(`Only members of ${W.org} can merge.`);
      await checkPage(w, await visit(w, `${base}/-/pulls/2`));
      const pr = `/${W.org}/${repo.name}/-/pulls/2`;
      expect(await forcePost(w, `${pr}/state`, { state: 'closed' })).toBe(403);
      expect(await textOf(w, '.flash.error')).toContain('only the pull request author or an org owner');
      expect(await forcePost(w, `${pr}/merge`, { style: 'merge' })).toBe(403);
      expect(await forcePost(w, `/${W.org}/${repo.name}/-/pulls/new`, { title: 't', source: 'clash' })).toBe(
        403,
      );
      // anyone may comment on a public repository's pull request, as the API allows
      await visit(w, `${base}/-/pulls/2`);
      await w.page.getByLabel('Add a comment', { exact: true }).fill('from outside');
      await w.page.getByRole('button', { name: 'Comment' }).click();
      expect(await textOf(w, '.comment:last-of-type .markdown')).toBe('from outside');
      await w.context.close();
      const anon = await watchedPage(browser);
      await visit(anon, `${base}/-/pulls/2`);
      expect(await anon.page.locator('main form[method="post"]').count()).toBe(0);
      await visit(anon, `${base}/-/pulls/99`, 404);
      await visit(anon, `${base}/-/pulls?status=all`, 400);
      await visit(anon, `${base}/-/pulls/new?source=nope`, 404);
      expect(await textOf(anon, '.flash.error')).toBe(
        'Nothing to compare: the source "nope" does not exist.',
      );
      await anon.context.close();
    });

    test('the read pages render without script', async () => {
      const pull = (await W.owner.client.get(`${repo.api}/pulls/1`)).body.data;
      const w = await watchedPage(browser, { javaScript: false });
      for (const path of [
        '/-/pulls',
        '/-/pulls?status=merged',
        '/-/pulls/1',
        '/-/pulls/1/commits',
        '/-/pulls/1/files',
        `/-/pulls/new?source=clash`,
        `/-/compare/${pull.base_commit}...${pull.head_commit}/file/0?back=${encodeURIComponent(`/${W.org}/${repo.name}/-/pulls/1/files`)}`,
      ]) {
        await visit(w, `${base}${path}`);
        expect(await w.page.locator('main').textContent()).not.toBe('');
      }
      expect(await w.page.locator('main h2').first().textContent()).toBe('README');
      await w.page.getByRole('link', { name: '← All changed files' }).click();
      expect(new URL(w.page.url()).pathname).toBe(`/${W.org}/${repo.name}/-/pulls/1/files`);
      expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
      await w.context.close();
    });
  });
}
