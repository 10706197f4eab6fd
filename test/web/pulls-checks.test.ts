/**
 * A pull request page shows its checks (the commit statuses of its head) with their states and
 * links, and a merge that a required check blocks says why in words.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { checkPage, openBrowser, signIn, visit, watchedPage } from '../helpers/browser.ts';
import { PrRepo } from '../helpers/pulls.ts';
import { statusRule } from '../helpers/status-rules.ts';
import { pullWorld, settledBox, textOf, type PullWorld } from './pulls-fixture.ts';

let browser: Browser;
let ts: TestServer;
let W: PullWorld;
let repo: PrRepo;

beforeAll(async () => {
  [browser, ts] = await Promise.all([openBrowser(), startTestServer()]);
  W = await pullWorld(ts);
  repo = await PrRepo.create(W.owner, W.org, 'git');
  await statusRule(ts, repo.id, { pattern: 'main', required_contexts: ['ext/ci'] });
  await repo.commitOn('feature', { 'a.txt': 'a\n' }, 'Add a');
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

describe('pull request checks', () => {
  test('the page lists each context with its state and link; a merge blocked by a failed check says why', async () => {
    const pr = (await W.owner.client.post(`${repo.api}/pulls`, { title: 'Checked', source_ref: 'feature' }))
      .body.data;
    const report = (state: string, context: string, target_url: string) =>
      W.owner.client.post(`${repo.api}/statuses/${pr.head_commit}`, { state, context, target_url });
    expect((await report('failure', 'ext/ci', 'https://ci.example/runs/7')).status).toBe(201);
    expect((await report('success', 'lint', 'https://lint.example/3')).status).toBe(201);

    const w = await watchedPage(browser);
    const page = `/${W.org}/${repo.name}/-/pulls/${pr.number}`;
    await signIn(w, ts.url, W.ownerWeb, page);
    await settledBox(w);
    expect(await textOf(w, 'section.pr-checks h2')).toBe('Some checks failed');
    const items = w.page.locator('section.pr-checks li');
    expect((await items.allTextContents()).map((t) => t.replace(/\s+/g, ' ').trim())).toEqual([
      'failure ext/ci',
      'success lint',
    ]);
    expect(await w.page.getByRole('link', { name: 'ext/ci' }).getAttribute('href')).toBe(
      'https://ci.example/runs/7',
    );
    await checkPage(w, await visit(w, `${ts.url}${page}`));

    await w.page.getByRole('button', { name: 'Merge pull request' }).click();
    expect(await textOf(w, '.flash.error')).toBe(
      'Not merged: a check this branch requires failed. Push a fix to the source, then merge again.',
    );
    expect((await W.owner.client.get(`${repo.api}/pulls/${pr.number}`)).body.data.status).toBe('open');
  });
});
