/**
 * The issue pages of a Git repository in a real browser: an issue opened from a `.triad`
 * template (the `.github` one not offered), labelled, assigned, commented with a preview, pinned
 * up to the cap, closed; who sees which controls and what a forced form answers; the list's
 * filters and an issue read with script off; a private repository's issues for strangers; the
 * preview's rules. Every page is checked (CSP, axe, keyboard).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, screenshot, visit, watchedPage, type Watched } from '../helpers/browser.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { submit } from './settings-helpers.ts';
import {
  browserOf,
  expectAlert,
  forcePost,
  repoWith,
  team,
  template,
  textsOf,
  type Team,
} from './issues-fixture.ts';

let browser: Browser;
let ts: TestServer;
let T: Team;
let base: string;
let api: string;
let repoId: number;
let wo: Watched;

const BUG_BODY = '## Steps\n\n1. Open the page\n2. See the **error**\n';

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  T = await team(ts);
  const files = {
    'README.md': '# issues\n',
    '.triad/ISSUE_TEMPLATE/bug.md': template(
      {
        name: 'Bug report',
        about: 'Something does not work',
        title: '[bug] ',
        labels: ['bug', 'nonexistent'],
        assignees: [T.member.username],
      },
      BUG_BODY,
    ),
    '.triad/ISSUE_TEMPLATE/feature.md': template({ name: 'Feature request', about: 'An idea' }, 'Idea\n'),
    '.triad/ISSUE_TEMPLATE/zz-broken.md': template({ about: 'no name' }, 'x\n'),
    '.github/ISSUE_TEMPLATE/github.md': template({ name: 'GitHub only' }, 'never offered\n'),
  };
  const r = await repoWith(ts, T, 'git', files);
  ({ base, api } = r);
  repoId = r.repo.id;
  const owner = ts.anon.as(T.owner.token);
  for (const [path, name] of [
    [`${r.repo.api}/labels`, 'bug'],
    [`/api/v1/orgs/${T.org}/labels`, 'triage'],
  ] as const) {
    expect((await owner.post(path, { name, color: '#d73a4a' })).status).toBe(201);
  }
  wo = await browserOf(browser, ts, T.owner);
});
afterAll(async () => {
  await wo?.context.close();
  await browser?.close();
  await ts?.close();
});

describe('issues in the pages', () => {
  test('an issue is opened from a .triad template: chooser, prefilled form, preview, the issue', async () => {
    const page = wo.page;
    const list = await visit(wo, base);
    expect(await page.locator('nav.tabs a[aria-current="page"]').textContent()).toBe('Issues');
    await expect(page.locator('main').textContent()).resolves.toContain('No issues here yet.');
    await checkPage(wo, list);
    await page.getByRole('link', { name: 'New issue' }).click();
    await page.waitForURL(/\/issues\/new$/);
    expect(await textsOf(wo, '.template-choice h2')).toEqual([
      'Bug report',
      'Feature request',
      'Blank issue',
    ]);
    expect(await page.locator('.template-problems').textContent()).toContain(
      '.triad/ISSUE_TEMPLATE/zz-broken.md: "name" is required',
    );
    await expect(page.locator('main').textContent()).resolves.not.toContain('GitHub only');
    await checkPage(wo, (await page.reload())!);

    await page.getByRole('link', { name: 'Get started with Bug report' }).click();
    await page.waitForURL(/template=bug\.md$/);
    expect(await page.getByLabel('Title', { exact: true }).inputValue()).toBe('[bug] ');
    const description = page.getByLabel('Description', { exact: true });
    expect(await description.inputValue()).toBe(BUG_BODY);
    expect(await page.getByLabel('bug', { exact: true }).isChecked()).toBe(true);
    expect(await page.getByLabel('triage', { exact: true }).isChecked()).toBe(false);
    expect(await page.getByLabel(T.member.username, { exact: true }).isChecked()).toBe(true);
    await expect(page.locator('main').textContent()).resolves.toContain(
      'names labels this repository does not have, left out: nonexistent',
    );
    await checkPage(wo, (await page.reload())!);

    await page.getByLabel('Title', { exact: true }).fill('[bug] The page breaks');
    await page.getByRole('button', { name: 'Preview', exact: true }).click();
    const preview = page.getByRole('region', { name: 'Preview of Description' });
    await expect(preview.locator('h2').textContent()).resolves.toBe('Steps');
    expect(await preview.locator('strong').textContent()).toBe('error');
    expect(await description.isVisible()).toBe(false);
    await page.getByRole('button', { name: 'Write', exact: true }).click();
    expect(await description.isVisible()).toBe(true);
    await page.getByLabel('Severity').selectOption('high');
    expect((await submit(wo, 'Create issue')).status()).toBe(303);

    expect(new URL(page.url()).pathname).toMatch(/\/-\/issues\/1$/);
    expect(await page.locator('h1.issue-title').textContent()).toContain('[bug] The page breaks');
    expect(await page.locator('#issue-body h2').textContent()).toBe('Steps');
    expect(await textsOf(wo, '.issue-side .label-chip')).toEqual(['bug']);
    expect(await textsOf(wo, '.issue-side ul.people a')).toEqual([T.member.username]);
    const shown = await page.reload();
    await screenshot(wo, 'issue');
    await checkPage(wo, shown!);
    const issue = (await ts.anon.get(`${api}/1`)).body.data;
    expect(issue).toMatchObject({
      title: '[bug] The page breaks',
      body: BUG_BODY,
      state: 'open',
      severity: 'high',
      labels: [{ name: 'bug' }],
      assignees: [{ username: T.member.username }],
    });
    expect(issue).not.toHaveProperty('pinned');
  });

  test('labels, assignees, severity and a comment with its preview change the issue as the API does', async () => {
    const page = wo.page;
    await visit(wo, `${base}/1`);
    await page.getByLabel('Label to add').selectOption('triage');
    expect((await submit(wo, 'Add label')).status()).toBe(303);
    expect((await submit(wo, 'Remove the label bug')).status()).toBe(303);
    expect(await textsOf(wo, '.issue-side .label-chip')).toEqual(['triage']);
    expect((await submit(wo, `Unassign ${T.member.username}`)).status()).toBe(303);
    await expect(page.locator('.issue-side').textContent()).resolves.toContain('Nobody yet.');
    await page.getByLabel('Member to assign').selectOption(T.owner.username);
    expect((await submit(wo, 'Assign')).status()).toBe(303);
    expect(await textsOf(wo, '.issue-side ul.people a')).toEqual([T.owner.username]);
    await page.locator('#set-severity').selectOption('critical');
    expect((await submit(wo, 'Set severity')).status()).toBe(303);
    expect(await page.locator('.issue-meta').textContent()).toContain('Severity: critical');

    // an empty comment is refused and the form shown again
    expect((await submit(wo, 'Comment')).status()).toBe(400);
    await expectAlert(wo, 'must not be empty');
    const comment = page.getByLabel('Comment', { exact: true });
    await comment.fill('Seen on **Tuesday**: `npm start`');
    await page.getByRole('button', { name: 'Preview', exact: true }).click();
    const preview = page.getByRole('region', { name: 'Preview of Comment' });
    await expect(preview.locator('strong').textContent()).resolves.toBe('Tuesday');
    const res = await submit(wo, 'Comment');
    expect(res.status()).toBe(303);
    expect(res.headers().location).toMatch(/#comment-\d+$/);
    expect(await page.locator('article.comment').last().locator('code').textContent()).toBe('npm start');
    await checkPage(wo, (await page.reload())!);

    const issue = (await ts.anon.get(`${api}/1`)).body.data;
    expect(issue).toMatchObject({
      severity: 'critical',
      labels: [{ name: 'triage' }],
      assignees: [{ username: T.owner.username }],
      comments: [{ body: 'Seen on **Tuesday**: `npm start`' }],
    });
    const events = (await outboxEvents(ts, repoId)).map((e) => e.event_type);
    expect(events.filter((e) => e.startsWith('issue.'))).toEqual(['issue.opened', 'issue.commented']);
  });

  test('members pin up to three issues, the fourth is refused naming the cap; pins lead the list; a closed one stays', async () => {
    const owner = ts.anon.as(T.owner.token);
    for (const title of ['Second', 'Third', 'Fourth']) {
      expect((await owner.post(api, { title })).status).toBe(201);
    }
    for (const n of [1, 3, 2]) {
      await visit(wo, `${base}/${n}`);
      expect((await submit(wo, 'Pin issue')).status()).toBe(303);
      await expect(wo.page.getByRole('button', { name: 'Unpin issue' }).count()).resolves.toBe(1);
    }
    await visit(wo, `${base}/4`);
    const refused = await submit(wo, 'Pin issue');
    expect(refused.status()).toBe(409);
    await expectAlert(wo, 'a repository may have at most 3 pinned issues; unpin one first');
    await checkPage(wo, refused);

    const list = await visit(wo, base);
    expect(await textsOf(wo, '.pinned-list a')).toEqual(['[bug] The page breaks', 'Third', 'Second']);
    await screenshot(wo, 'issues');
    await checkPage(wo, list);
    // closed, it stays pinned, marked closed
    await visit(wo, `${base}/1`);
    expect((await submit(wo, 'Close issue')).status()).toBe(303);
    expect(await wo.page.locator('.issue-meta .issue-state').textContent()).toBe('Closed');
    await visit(wo, base);
    expect(await textsOf(wo, '.pinned-list li .issue-state')).toEqual(['Closed', 'New', 'New']);
    expect(await textsOf(wo, '.issue-list .issue-link')).toEqual(['Fourth', 'Third', 'Second']);

    // a member who is no owner unpins and pins
    const wm = await browserOf(browser, ts, T.member);
    await visit(wm, `${base}/3`);
    expect((await submit(wm, 'Unpin issue')).status()).toBe(303);
    await visit(wm, `${base}/4`);
    expect((await submit(wm, 'Pin issue')).status()).toBe(303);
    await visit(wm, base);
    expect(await textsOf(wm, '.pinned-list a')).toEqual(['[bug] The page breaks', 'Second', 'Fourth']);
    await wm.context.close();
  });

  test('only the author or an owner closes and reopens; others have no buttons and forced forms are refused', async () => {
    const ws = await browserOf(browser, ts, T.stranger);
    const wm = await browserOf(browser, ts, T.member);
    // the stranger sees the templates, not their problems; may comment, but not pin or close
    await visit(ws, `${base}/new`);
    expect(await textsOf(ws, '.template-choice h2')).toEqual([
      'Bug report',
      'Feature request',
      'Blank issue',
    ]);
    await expect(ws.page.locator('.template-problems').count()).resolves.toBe(0);
    await visit(ws, `${base}/2`);
    for (const name of ['Pin issue', 'Unpin issue', 'Close issue'])
      await expect(ws.page.getByRole('button', { name }).count()).resolves.toBe(0);
    expect(await ws.page.getByLabel('Comment', { exact: true }).count()).toBe(1);
    const pin = await forcePost(ws, `${base}/2/pin`, {});
    expect(pin.status()).toBe(403);
    await expectAlert(ws, 'only members of the organization may pin or unpin issues');
    const close = await forcePost(ws, `${base}/2/state`, { state: 'closed' });
    expect(close.status()).toBe(403);
    expect(await ws.page.locator('.error-page h1').textContent()).toBe('Forbidden');
    expect(await ws.page.locator('.error-page').textContent()).toContain(
      'only the issue author or an org owner',
    );
    await checkPage(ws, close);
    // the member closes and reopens an issue of their own, not the owner's
    await visit(wm, `${base}/2`);
    await expect(wm.page.getByRole('button', { name: 'Close issue' }).count()).resolves.toBe(0);
    const mine = await ts.anon.as(T.member.token).post(api, { title: 'Mine' });
    await visit(wm, `${base}/${mine.body.data.number}`);
    expect((await submit(wm, 'Close issue')).status()).toBe(303);
    expect((await submit(wm, 'Reopen issue')).status()).toBe(303);
    expect(await wm.page.locator('.issue-meta .issue-state').textContent()).toBe('Open');
    // a bad value is a clear 400, and an unknown issue a 404 page
    expect((await forcePost(wo, `${base}/2/state`, { state: 'sideways' })).status()).toBe(400);
    await visit(wo, `${base}/999`, 404);
    await visit(wo, `${base}?severity=bogus`, 400);
    expect(await wo.page.locator('.error-page').textContent()).toContain('must be one of');
    const kinds = (await outboxEvents(ts, repoId)).map((e) => e.event_type);
    expect(kinds.filter((k) => k === 'issue.closed')).toHaveLength(2);
    expect(kinds).toContain('issue.reopened');
    await ws.context.close();
    await wm.context.close();
  });

  test('without script the list filters and pages, and an issue reads; the editor is a plain textarea', async () => {
    const off = await browserOf(browser, ts, T.owner, false);
    await visit(off, `${base}?per_page=2`);
    expect(await textsOf(off, '.issue-list .issue-link')).toEqual(['Mine', 'Fourth']);
    await off.page.getByRole('link', { name: 'Next' }).click();
    expect(await textsOf(off, '.issue-list .issue-link')).toEqual(['Third', 'Second']);
    await off.page.getByLabel('State').selectOption('closed');
    await off.page.getByRole('button', { name: 'Filter' }).click();
    await off.page.waitForURL(/state=closed/);
    expect(new URL(off.page.url()).searchParams.get('per_page')).toBe('2');
    expect(await textsOf(off, '.issue-list .issue-link')).toEqual(['[bug] The page breaks']);
    await off.page.getByLabel('State').selectOption('all');
    await off.page.getByLabel('Label').selectOption('triage');
    await off.page.getByLabel('Assignee').fill(T.owner.username);
    await off.page.getByRole('button', { name: 'Filter' }).click();
    await off.page.waitForURL(/label=triage/);
    expect(await textsOf(off, '.issue-list .issue-link')).toEqual(['[bug] The page breaks']);
    await off.page.getByLabel('Title contains').fill('nothing like this');
    await off.page.getByRole('button', { name: 'Filter' }).click();
    await off.page.waitForURL(/q=nothing/);
    await expect(off.page.locator('main').textContent()).resolves.toContain('No issues match these filters.');
    await visit(off, `${base}/1`);
    expect(await off.page.locator('#issue-body h2').textContent()).toBe('Steps');
    expect(await off.page.locator('.md-modes').isVisible()).toBe(false);
    expect(await off.page.getByLabel('Comment', { exact: true }).isVisible()).toBe(true);
    await off.context.close();
    // signed out: the issue reads, with no form
    const anon = await watchedPage(browser, { javaScript: false });
    await visit(anon, `${base}/1`);
    expect(await anon.page.locator('main form').count()).toBe(0);
    expect(await anon.page.locator('.sign-in-note').textContent()).toContain('Sign in to comment');
    await anon.context.close();
  });

  test("a private repository's issues are not found by strangers; the preview keeps the form rules", async () => {
    const hidden = await repoWith(ts, T, 'git', undefined, { isPrivate: true });
    expect((await ts.anon.as(T.owner.token).post(hidden.api, { title: 'secret' })).status).toBe(201);
    const ws = await browserOf(browser, ts, T.stranger);
    for (const path of ['', '/1', '/new']) await visit(ws, `${hidden.base}${path}`, 404);
    const anon = await watchedPage(browser);
    await visit(anon, `${hidden.base}/1`, 404);
    await anon.context.close();
    await visit(wo, `${hidden.base}/1`);
    const preview = (text: string, token?: string) =>
      wo.page.evaluate(
        async ({ url, text, token }) => {
          const doc = (globalThis as any).document;
          const _csrf = token ?? doc.querySelector('input[name="_csrf"]').value;
          const r = await fetch(url, { method: 'POST', body: new URLSearchParams({ _csrf, text }) });
          return { status: r.status, fragment: r.headers.get('x-triad-fragment'), body: await r.text() };
        },
        { url: `${hidden.base.replace(/\/issues$/, '')}/preview`, text, token },
      );
    expect(await preview('# Hi <script>alert(1)</script>')).toEqual({
      status: 200,
      fragment: '1',
      body: '<div class="markdown"><h1>Hi &lt;script&gt;alert(1)&lt;/script&gt;</h1>\n</div>',
    });
    const big = await preview('x'.repeat(100_001));
    expect([big.status, big.fragment]).toEqual([413, '1']);
    expect(big.body).toContain('too long to preview: 100,001 characters, at most 100,000');
    expect((await preview('hi', 'wrong-token')).status).toBe(403);
    await visit(ws, `${ts.url}/-/explore`);
    const strangerPreview = await ws.page.evaluate(
      async (url) => {
        const doc = (globalThis as any).document;
        const _csrf = doc.querySelector('input[name="_csrf"]').value;
        return (await fetch(url, { method: 'POST', body: new URLSearchParams({ _csrf, text: 'x' }) })).status;
      },
      `${hidden.base.replace(/\/issues$/, '')}/preview`,
    );
    expect(strangerPreview).toBe(404);
    await ws.context.close();
  });
});
