/**
 * The code pages of a Git repository in a real browser: home (README, clone box), tree, file
 * (highlighting, line anchors), raw, log with paging, changeset (collapsed files loaded on
 * demand), ref switcher, refs page, archives, the empty repository, pages without script, and a
 * private repository's pages and files for strangers.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, screenshot, visit, watchedPage, webUser } from '../helpers/browser.ts';
import { newRepo } from '../helpers/factories.ts';
import { postMultipart } from '../helpers/multipart.ts';
import { ok, withCreds, writeFile } from '../helpers/vcs.ts';
import {
  cloneAgain,
  cookieOf,
  expectHome,
  MAIN_2,
  PNG,
  pushedRepo,
  signedIn,
  textOf,
  world,
  type Pushed,
  type World,
} from './code-fixture.ts';

let browser: Browser;
let ts: TestServer;
let W: World;
let P: Pushed;
let base: string;

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  W = await world(ts);
  P = await pushedRepo(W, 'git');
  base = `${ts.url}/${W.org}/${P.repo.name}`;
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

describe('a Git repository', () => {
  test('the home shows the README rendered, the clone URL and the last commit; the clone URL still clones', async () => {
    const w = await watchedPage(browser);
    const res = await visit(w, base);
    await expectHome(w, P);
    expect(await textOf(w, '.last-commit .subject')).toBe('Second commit');
    expect(await textOf(w, 'pre.commands')).toBe(`git clone ${P.repo.clone}`);
    expect(await w.page.locator('table.tree a', { hasText: 'src/' }).count()).toBe(1);
    expect(await w.page.locator('button[data-copy]').isVisible()).toBe(true);
    await checkPage(w, res);
    await screenshot(w, 'repo-home');
    expect(await cloneAgain('git', P.repo.clone, W.owner.token)).toContain('# Hello Triad');
    await w.context.close();
  });

  test('tree pages have breadcrumbs, and a branch with a slash typed by hand is found', async () => {
    const w = await watchedPage(browser);
    const res = await visit(w, `${base}/-/tree/main/docs/deep`);
    const crumbs = w.page.locator('nav.crumbs li');
    expect(await crumbs.allTextContents()).toEqual([P.repo.name, 'docs', 'deep']);
    expect(await crumbs.nth(1).locator('a').getAttribute('href')).toBe(
      `/${W.org}/${P.repo.name}/-/tree/main/docs`,
    );
    expect(await w.page.locator('table.tree td.name a').allTextContents()).toEqual(['..', 'nested/']);
    await checkPage(w, res);
    await screenshot(w, 'tree');
    // the README's directory: src at the branch feature/x, as typed by hand and as linked
    await visit(w, `${base}/-/tree/feature/x/src`);
    expect(await w.page.locator('table.tree td.name a').allTextContents()).toEqual([
      '..',
      'feature.ts',
      'main.ts',
    ]);
    expect(await textOf(w, 'details.ref-switch summary')).toContain('feature/x');
    await visit(w, `${base}/-/tree/${encodeURIComponent('feature/x')}/src`);
    await visit(w, `${base}/-/tree/no-such-branch/src`, 404);
    await w.context.close();
  });

  test('a file is highlighted with line anchors; a range is marked by the island, a line without script', async () => {
    const w = await watchedPage(browser);
    const res = await visit(w, `${base}/-/blob/main/src/main.ts#L2-L3`);
    expect(await w.page.locator('.code-view .hljs-keyword').count()).toBeGreaterThan(0);
    expect(await w.page.locator('#L2 a.ln').getAttribute('href')).toBe('#L2');
    await w.page.waitForSelector('#L3.hl');
    expect(await w.page.locator('.l.hl').evaluateAll((els: any[]) => els.map((e) => e.id))).toEqual([
      'L2',
      'L3',
    ]);
    expect(await textOf(w, '.file-head .meta')).toBe('73 bytes · 4 lines');
    // shift-click makes a range from the last line clicked
    await w.page.locator('#L1 a.ln').click();
    await w.page.locator('#L4 a.ln').click({ modifiers: ['Shift'] });
    expect(new URL(w.page.url()).hash).toBe('#L1-L4');
    expect(await w.page.locator('.l.hl').count()).toBe(4);
    await checkPage(w, res, { keyboard: true });
    await screenshot(w, 'file');
    const off = await watchedPage(browser, { javaScript: false });
    await visit(off, `${base}/-/blob/main/src/main.ts#L2`);
    expect(await off.page.evaluate(() => (globalThis as any).document.querySelector(':target')?.id)).toBe(
      'L2',
    );
    // an image is shown from the raw route; a directory's path goes to its listing
    await visit(off, `${base}/-/blob/main/img/logo.png`);
    expect(await off.page.locator('.file-image img').evaluate((el: any) => el.naturalWidth)).toBe(1);
    await visit(off, `${base}/-/blob/main/docs`);
    expect(new URL(off.page.url()).pathname).toBe(`/${W.org}/${P.repo.name}/-/tree/main/docs`);
    await off.context.close();
    await w.context.close();
  });

  test('the raw route answers the exact bytes with the headers that keep it from running', async () => {
    const r = await fetch(`${base}/-/raw/main/src/main.ts`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe(MAIN_2);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
    expect(r.headers.get('content-disposition')).toBeNull();
    const png = await fetch(`${base}/-/raw/${P.c1}/img/logo.png?download=1`);
    expect(png.headers.get('content-type')).toBe('application/octet-stream');
    expect(png.headers.get('content-disposition')).toMatch(/^attachment; filename="logo.png"/);
    expect(Buffer.from(await png.arrayBuffer()).equals(PNG)).toBe(true);
    const again = await fetch(`${base}/-/raw/main/src/main.ts`, {
      headers: { 'if-none-match': r.headers.get('etag')! },
    });
    expect(again.status).toBe(304);
    const zip = await fetch(`${base}/-/archive/v1.0.zip`);
    expect([zip.status, zip.headers.get('content-type')]).toEqual([200, 'application/zip']);
    expect((await zip.arrayBuffer()).byteLength).toBeGreaterThan(100);
    const tgz = await fetch(`${base}/-/archive/${encodeURIComponent('feature/x')}.tar.gz`);
    expect([tgz.status, tgz.headers.get('content-type')]).toEqual([200, 'application/gzip']);
    await tgz.arrayBuffer();
    expect((await fetch(`${base}/-/archive/main.rar`)).status).toBe(404);
  });

  test('the history lists the commits with their refs, paged by 50', async () => {
    // 55 more commits on a branch of their own
    for (let i = 0; i < 55; i++)
      await ok('git', ['commit', '-q', '--allow-empty', '-m', `Commit ${i}`], P.work);
    await ok('git', ['push', '-q', withCreds(P.repo.clone, W.owner.token), 'main:long'], P.work);
    await ok('git', ['reset', '-q', '--hard', P.c2], P.work);
    const w = await watchedPage(browser);
    const res = await visit(w, `${base}/-/log`);
    expect(await w.page.locator('li.commit .subject a').allTextContents()).toEqual([
      'Second commit',
      'First commit',
    ]);
    expect(await w.page.locator('li.commit').first().locator('.badge.tag').allTextContents()).toEqual([
      'v1.0',
    ]);
    await checkPage(w, res);
    await screenshot(w, 'log');
    await visit(w, `${base}/-/log/long`);
    expect(await w.page.locator('li.commit').count()).toBe(50);
    await w.page.getByRole('link', { name: 'Next' }).click();
    await w.page.waitForURL(/page=2/);
    expect(await w.page.locator('li.commit .subject a').allTextContents()).toEqual([
      'Commit 4',
      'Commit 3',
      'Commit 2',
      'Commit 1',
      'Commit 0',
      'Second commit',
      'First commit',
    ]);
    await w.context.close();
  });

  test('a changeset shows its message and diff; collapsed files load on demand, or on a page of their own', async () => {
    const w = await watchedPage(browser);
    const res = await visit(w, `${base}/-/changeset/${P.c2}`);
    expect(await textOf(w, 'h1.subject')).toBe('Second commit');
    expect(await w.page.locator('table.diff tr.add').allTextContents()).toEqual(['2+  const answer = 42;']);
    expect(await w.page.locator('table.diff tr.del').allTextContents()).toEqual(['2-  const answer = 41;']);
    await checkPage(w, res);
    await screenshot(w, 'changeset');
    const first = await watchedPage(browser);
    await visit(first, `${base}/-/changeset/${P.c1}`);
    expect(await textOf(first, 'pre.message')).toBe('With a body line.');
    expect(await first.page.locator('.diff-file').count()).toBe(5);
    await first.context.close();

    // a commit touching 30 files: the first 20 inline, the rest collapsed
    for (let i = 0; i < 30; i++)
      await writeFile(P.work, `many/f${String(i).padStart(2, '0')}.txt`, `line ${i}\n`);
    await ok('git', ['add', '.'], P.work);
    await ok('git', ['commit', '-q', '-m', 'Thirty files'], P.work);
    const wide = (await ok('git', ['rev-parse', 'HEAD'], P.work)).trim();
    await ok('git', ['push', '-q', withCreds(P.repo.clone, W.owner.token), 'HEAD:wide'], P.work);
    const res2 = await visit(w, `${base}/-/changeset/${wide}`);
    expect(await w.page.locator('.diff-list li').count()).toBe(30);
    expect(await w.page.locator('.diff-file table.diff').count()).toBe(20);
    const load = w.page.locator('#file-25 button.load-diff');
    expect(await w.page.locator('button.load-diff').count()).toBe(10);
    await checkPage(w, res2, { keyboard: false });
    await load.click();
    await w.page.locator('#file-25 table.diff').waitFor();
    expect(await w.page.locator('#file-25 tr.add').textContent()).toBe('1+line 25');
    expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
    // without script: the link to the file's own page
    const off = await watchedPage(browser, { javaScript: false });
    await visit(off, `${base}/-/changeset/${wide}`);
    expect(await off.page.locator('button.load-diff').first().isVisible()).toBe(false);
    await off.page
      .locator('#file-26')
      .getByRole('link', { name: /own page/ })
      .click();
    expect(await off.page.locator('table.diff tr.add').textContent()).toBe('1+line 26');
    await off.context.close();
    await w.context.close();
  });

  test('the ref switcher lists branches and tags with a filter, and the refs page all of them', async () => {
    const w = await watchedPage(browser);
    await visit(w, `${base}/-/tree/main/src`);
    const sw = w.page.locator('details.ref-switch');
    await sw.locator('summary').click();
    const refs = sw.locator('.ref-list a');
    expect(await refs.allTextContents()).toEqual(expect.arrayContaining(['main', 'feature/x', 'v1.0']));
    expect(await sw.getByRole('link', { name: 'feature/x' }).getAttribute('href')).toBe(
      `/${W.org}/${P.repo.name}/-/tree/feature%2Fx/src`,
    );
    await sw.getByLabel('Filter branches and tags').fill('feat');
    expect(await sw.locator('.ref-list li:visible a').allTextContents()).toEqual(['feature/x']);
    const res = await visit(w, `${base}/-/refs`);
    expect(await w.page.locator('table.refs td:first-child a').allTextContents()).toEqual(
      expect.arrayContaining(['main', 'feature/x', 'long', 'v1.0']),
    );
    await checkPage(w, res);
    // without script the switcher is a plain <details> with no filter
    const off = await watchedPage(browser, { javaScript: false });
    await visit(off, `${base}/-/log`);
    await off.page.locator('details.ref-switch summary').click();
    expect(await off.page.locator('details.ref-switch input').count()).toBe(0);
    await off.page.locator('details.ref-switch').getByRole('link', { name: 'v1.0' }).click();
    expect(await textOf(off, 'h1')).toBe('History of v1.0');
    await off.context.close();
    await w.context.close();
  });

  test('read pages render without script', async () => {
    const w = await watchedPage(browser, { javaScript: false });
    for (const path of [
      '',
      '/-/tree/main/src',
      '/-/blob/main/README.md',
      '/-/log',
      `/-/changeset/${P.c2}`,
      '/-/refs',
    ]) {
      const res = await visit(w, `${base}${path}`);
      expect(res.headers()['content-security-policy']).toContain("script-src 'self'");
      expect(await w.page.locator('main').textContent()).not.toBe('');
    }
    expect(w.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
    await w.context.close();
  });

  test('an empty repository shows the commands of its first push', async () => {
    const repo = await newRepo(W.owner, W.org, { vcs: 'git' });
    const w = await watchedPage(browser);
    const res = await visit(w, `${ts.url}/${W.org}/${repo.name}`);
    expect(await textOf(w, '.empty-repo h2')).toBe('This repository is empty');
    const cmds = await textOf(w, '.empty-repo pre');
    expect(cmds).toContain('git init -b main');
    expect(cmds).toContain(`git remote add origin ${repo.clone}`);
    await checkPage(w, res);
    await visit(w, `${ts.url}/${W.org}/${repo.name}/-/log`);
    expect(await textOf(w, 'p.empty')).toBe('No commits yet.');
    await w.context.close();
  });
});

describe('release assets through the session', () => {
  test('a draft release asset is 404 to anonymous visitors and strangers, the bytes to members; once published, to anyone', async () => {
    const api = `/api/v1/repos/${W.org}/${P.repo.name}/releases`;
    const rel = await W.owner.client.post(api, { tag_name: 'v1.0', name: 'One', draft: true });
    expect(rel.status).toBe(201);
    const data = Buffer.from('asset bytes\n');
    const up = await postMultipart(`${ts.url}${api}/${rel.body.data.id}/assets`, W.owner.token, [
      { field: 'attachment', filename: 'notes.txt', contentType: 'text/plain', data },
    ]);
    expect(up.status).toBe(201);
    const url = `${base}/-/releases/${rel.body.data.id}/assets/${up.body.data.id}`;
    const member = await signedIn(browser, ts, W.user);
    const stranger = await signedIn(browser, ts, await webUser(ts));
    const get = (cookie?: string) => fetch(url, { headers: cookie === undefined ? {} : { cookie } });
    expect((await get()).status).toBe(404);
    expect((await get(await cookieOf(stranger.context, ts.url))).status).toBe(404);
    const mine = await get(await cookieOf(member.context, ts.url));
    expect(mine.status).toBe(200);
    expect(mine.headers.get('content-disposition')).toMatch(/^attachment; filename="notes.txt"/);
    expect(Buffer.from(await mine.arrayBuffer()).equals(data)).toBe(true);
    expect((await W.owner.client.patch(`${api}/${rel.body.data.id}`, { draft: false })).status).toBe(200);
    const anon = await get();
    expect([anon.status, await anon.text()]).toEqual([200, 'asset bytes\n']);
    expect((await fetch(`${base}/-/releases/${rel.body.data.id}/assets/999999`)).status).toBe(404);
    expect((await fetch(`${base}/-/releases/x/assets/1`)).status).toBe(404);
    await member.context.close();
    await stranger.context.close();
  });
});

describe('a private Git repository', () => {
  test('its pages and files are 404 to anonymous visitors and strangers, 200 to members', async () => {
    const priv = await pushedRepo(W, 'git', { isPrivate: true });
    const stranger = await webUser(ts);
    const member = await signedIn(browser, ts, W.user);
    const other = await signedIn(browser, ts, stranger);
    const pb = `${ts.url}/${W.org}/${priv.repo.name}`;
    const paths = [
      '',
      '/-/tree/main',
      '/-/tree/main/src',
      '/-/blob/main/src/main.ts',
      '/-/raw/main/src/main.ts',
      '/-/log',
      `/-/changeset/${priv.c2}`,
      `/-/changeset/${priv.c2}/file/0`,
      `/-/changeset/${priv.c2}/fragment/0`,
      '/-/refs',
      '/-/archive/main.zip',
      '/-/archive/main.tar.gz',
    ];
    const as = async (cookie: string | undefined) => {
      const out: Record<string, number> = {};
      for (const p of paths) {
        const headers: Record<string, string> = { accept: 'text/html' };
        if (cookie !== undefined) headers.cookie = cookie;
        const r = await fetch(`${pb}${p}`, { headers, redirect: 'manual' });
        await r.arrayBuffer();
        out[p] = r.status;
      }
      return out;
    };
    const all = (status: number) => Object.fromEntries(paths.map((p) => [p, status]));
    expect(await as(undefined)).toEqual(all(404));
    expect(await as(await cookieOf(other.context, ts.url))).toEqual(all(404));
    expect(await as(await cookieOf(member.context, ts.url))).toEqual(all(200));
    // the page a stranger sees is the ordinary 404 page
    const res = await visit(other, `${pb}/-/blob/main/src/main.ts`, 404);
    expect(await textOf(other, 'h1')).toBe('Not found');
    await checkPage(other, res);
    await member.context.close();
    await other.context.close();
  });
});
