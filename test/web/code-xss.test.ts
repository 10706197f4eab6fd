/**
 * Markup where a repository puts text (file and directory names, branch, tag and bookmark names,
 * commit messages and authors, README markdown with raw HTML and unsafe links, file contents)
 * shows as text on every code page: no dialog, no CSP violation, no page error, no element made
 * of it. Git for most; Mercurial for what Git refuses or cannot browse (an author with `<>`, a
 * branch name with spaces and markup that resolves).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, visit, watchedPage } from '../helpers/browser.ts';
import { expectInert } from './inert.ts';
import { newRepo } from '../helpers/factories.ts';
import { ok, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import { world, type World } from './code-fixture.ts';

const SCRIPT = '<script>alert(1)</script>';
const IMG_NAME = '<img src=x onerror=alert(1)>.txt';
const SVG_NAME = '"><svg onload=alert(1)>.md';
const DIR = '<i onmouseover=alert(1)>d';
const BREAKOUT = `</code></pre>${SCRIPT}\n<img src=x onerror=alert(1)>\n`;
const README = `# XSS corpus

${SCRIPT}
<img src=x onerror=alert(1)>
<a href="javascript:alert(1)">raw link</a>

[js link](javascript:alert(1))
![js image](javascript:alert(1))
![ext](https://example.invalid/x.png)
[vb](vbscript:msgbox(1)) [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
`;
const BRANCH = 'x"><img-src=x-onerror=alert(1)>';
const TAG = SCRIPT;
const HG_BRANCH = '<img src=x onerror=alert(1)> br';

let browser: Browser;
let ts: TestServer;
let W: World;
let gitBase: string;
let hgBase: string;
let gitCommit: string;

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  W = await world(ts);
  const git = await newRepo(W.owner, W.org, { vcs: 'git' });
  const work = await tempDir('triad-web-xss-');
  await ok('git', ['init', '-q', '-b', 'main', '.'], work);
  await writeFile(work, 'README.md', README);
  await writeFile(work, IMG_NAME, BREAKOUT);
  await writeFile(work, SVG_NAME, `# title\n\n${SCRIPT}\n`);
  await writeFile(work, `${DIR}/code.js`, `// ${SCRIPT}\nconst s = "${BREAKOUT.trim()}";\n`);
  await ok('git', ['add', '.'], work);
  await ok(
    'git',
    ['commit', '-q', '-m', `${SCRIPT} subject\n\n${SCRIPT} body <img src=x onerror=alert(1)>`],
    work,
  );
  gitCommit = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
  await ok('git', ['branch', BRANCH], work);
  await ok('git', ['tag', TAG], work);
  await ok('git', ['push', '-q', withCreds(git.clone, W.owner.token), 'main', BRANCH, '--tags'], work);
  gitBase = `${ts.url}/${W.org}/${git.name}`;

  const hg = await newRepo(W.owner, W.org, { vcs: 'hg' });
  const hw = await tempDir('triad-web-xss-hg-');
  await ok('hg', ['init', '.'], hw);
  await writeFile(hw, 'README', `${SCRIPT}\n`);
  await ok('hg', ['add', '-q'], hw);
  await ok('hg', ['commit', '-u', `${SCRIPT} <evil@example.test>`, '-m', SCRIPT], hw);
  await ok('hg', ['branch', '-q', HG_BRANCH], hw);
  await writeFile(hw, 'b.txt', 'b\n');
  await ok('hg', ['add', '-q'], hw);
  await ok('hg', ['commit', '-u', `${SCRIPT} <evil@example.test>`, '-m', 'on the branch'], hw);
  await ok('hg', ['bookmark', SCRIPT], hw);
  await ok('hg', ['push', '-q', '--new-branch', withCreds(hg.clone, W.owner.token)], hw);
  await ok('hg', ['push', '-q', '-B', SCRIPT, withCreds(hg.clone, W.owner.token)], hw).catch(() => '');
  hgBase = `${ts.url}/${W.org}/${hg.name}`;
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

describe('markup in a repository', () => {
  test('the home, README and tree show names and raw HTML as text; a foreign image is a link', async () => {
    const w = await watchedPage(browser);
    const res = await visit(w, gitBase);
    const md = w.page.locator('.readme .markdown');
    expect(await md.textContent()).toContain(SCRIPT);
    expect(await md.textContent()).toContain('<a href="javascript:alert(1)">raw link</a>');
    expect(await md.locator('img').count()).toBe(0);
    expect(await md.locator('a.external-image').getAttribute('href')).toBe('https://example.invalid/x.png');
    expect(await w.page.locator('table.tree a', { hasText: IMG_NAME }).count()).toBe(1);
    expect(await w.page.locator('table.tree a', { hasText: SVG_NAME }).count()).toBe(1);
    expect(await w.page.locator('.last-commit .subject').textContent()).toBe(`${SCRIPT} subject`);
    await w.page.locator('details.ref-switch summary').click();
    expect(await w.page.locator('.ref-list a').allTextContents()).toEqual(
      expect.arrayContaining([BRANCH, TAG]),
    );
    await w.page.locator('details.ref-switch summary').click();
    await checkPage(w, res);
    await expectInert(w);
    await w.page.locator('table.tree a', { hasText: DIR }).click();
    expect(await w.page.locator('nav.crumbs li').last().textContent()).toBe(DIR);
    await expectInert(w);
    await w.page.locator('table.tree a', { hasText: 'code.js' }).click();
    expect(await w.page.locator('.code-view').textContent()).toContain(SCRIPT);
    await expectInert(w);
    await w.context.close();
  });

  test('files whose names and contents hold markup show as text, rendered or not', async () => {
    const w = await watchedPage(browser);
    const res = await visit(w, `${gitBase}/-/blob/main/${encodeURIComponent(IMG_NAME)}`);
    expect(await w.page.locator('.code-view').textContent()).toContain(`</code></pre>${SCRIPT}`);
    expect(await w.page.locator('nav.crumbs li').last().textContent()).toBe(IMG_NAME);
    await checkPage(w, res);
    await expectInert(w);
    await visit(w, `${gitBase}/-/blob/main/${encodeURIComponent(SVG_NAME)}`);
    expect(await w.page.locator('.markdown').textContent()).toContain(SCRIPT);
    await expectInert(w);
    await visit(w, `${gitBase}/-/blob/main/${encodeURIComponent(SVG_NAME)}?plain=1`);
    expect(await w.page.locator('.code-view').textContent()).toContain(SCRIPT);
    await expectInert(w);
    for (const page of ['README.md', 'README.md?plain=1']) {
      await visit(w, `${gitBase}/-/blob/main/${page}`);
      await expectInert(w);
    }
    // the raw file is text that cannot run, even opened as a page
    const raw = await visit(w, `${gitBase}/-/raw/main/${encodeURIComponent(IMG_NAME)}`);
    expect(raw.headers()['content-security-policy']).toBe("default-src 'none'; sandbox");
    expect(w.incidents.dialogs).toEqual([]);
    await w.context.close();
  });

  test('the history, changeset and refs show messages and ref names as text', async () => {
    const w = await watchedPage(browser);
    await visit(w, `${gitBase}/-/log`);
    expect(await w.page.locator('li.commit .subject a').textContent()).toBe(`${SCRIPT} subject`);
    expect(await w.page.locator('li.commit .badge.tag').textContent()).toBe(TAG);
    await expectInert(w);
    const res = await visit(w, `${gitBase}/-/changeset/${gitCommit}`);
    expect(await w.page.locator('h1.subject').textContent()).toBe(`${SCRIPT} subject`);
    expect(await w.page.locator('pre.message').textContent()).toContain(`${SCRIPT} body`);
    expect(await w.page.locator('.diff-list a', { hasText: IMG_NAME }).count()).toBe(1);
    await checkPage(w, res);
    await expectInert(w);
    // its own page, by its place in the changeset
    const anchor = await w.page.locator('.diff-list a', { hasText: IMG_NAME }).getAttribute('href');
    await visit(w, `${gitBase}/-/changeset/${gitCommit}/file/${anchor!.replace('#file-', '')}`);
    expect(await w.page.locator('table.diff').textContent()).toContain(`</code></pre>${SCRIPT}`);
    await expectInert(w);
    await visit(w, `${gitBase}/-/refs`);
    expect(await w.page.locator('table.refs td:first-child a').allTextContents()).toEqual(
      expect.arrayContaining([BRANCH, TAG, 'main']),
    );
    await expectInert(w);
    await w.context.close();
  });

  test('a Mercurial author, branch and bookmark with markup show as text, and the branch can be browsed', async () => {
    const w = await watchedPage(browser);
    await visit(w, hgBase);
    await expectInert(w);
    await visit(w, `${hgBase}/-/log/${encodeURIComponent(HG_BRANCH)}`);
    expect(await w.page.locator('li.commit .author').first().textContent()).toContain(SCRIPT);
    expect(await w.page.locator('li.commit .badge.branch').first().textContent()).toBe(HG_BRANCH);
    await w.page.locator('details.ref-switch summary').click();
    expect(await w.page.locator('.ref-list a').allTextContents()).toEqual(
      expect.arrayContaining([HG_BRANCH, SCRIPT, 'default']),
    );
    await expectInert(w);
    await visit(w, `${hgBase}/-/tree/${encodeURIComponent(HG_BRANCH)}`);
    expect(await w.page.locator('table.tree a').allTextContents()).toEqual(['README', 'b.txt']);
    expect(await w.page.locator('.readme-text').textContent()).toBe(`${SCRIPT}\n`);
    await expectInert(w);
    await visit(w, `${hgBase}/-/changeset/${encodeURIComponent(HG_BRANCH)}`);
    expect(await w.page.locator('dl.commit-meta dd').first().textContent()).toContain(SCRIPT);
    await expectInert(w);
    await w.context.close();
  });
});
