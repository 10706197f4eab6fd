/**
 * Pipeline pages in a real browser: the list (filter, live rows, selection and "delete all
 * failed" with their confirmations), a pipeline's page (cancel, rerun, delete, refreshing while
 * it runs), a step's page (its log to signed-in users; anonymous readers are asked to sign in),
 * and the rights: non-members see no controls and are refused when they post anyway.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { TWO_STEPS, commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { startTestServer, type Client, type TestServer } from '../helpers/server.ts';
import {
  checkPage,
  openBrowser,
  screenshot,
  signIn,
  visit,
  watchedPage,
  webUser,
  type Watched,
  type WebUser,
} from '../helpers/browser.ts';
import { apiUser, submit } from './settings-helpers.ts';

let browser: Browser;
let ts: TestServer;
let owner: WebUser;
let outsider: WebUser;
let org: string;
let agent: Client;
let w: Watched;
/**
 * How long a live row or summary may take to show a change. The island refetches 1.5 s after each
 * answer, so a change normally shows within ~2 s, but on a loaded CI machine (chromium sharing two
 * CPUs with another test file) a fetch and render can take seconds; the wait ends as soon as the
 * badge changes, so the limit only matters when it never does (20 s, so that a test with two such
 * waits still reports which one failed before jest's 60 s test limit).
 */
const LIVE_MS = 20_000;

beforeAll(async () => {
  browser = await openBrowser();
  ts = await startTestServer();
  owner = await webUser(ts);
  outsider = await webUser(ts);
  org = await ts.newOrg(apiUser(ts, owner));
  agent = await newAgent(ts);
  w = await watchedPage(browser);
  await signIn(w, ts.url, owner);
}, 60_000);
afterAll(async () => {
  await w?.context.close();
  await browser?.close();
  await ts?.close();
});

async function push(r: GitRepo, n: number): Promise<void> {
  await commitFiles(r, { '.pipeline.yml': TWO_STEPS, 'n.txt': String(n) }, `change ${n}`);
  await r.push();
}

/** Claims the next pipeline: its id and steps' ids. */
async function claim(): Promise<{ id: number; steps: number[] }> {
  const job = (await agent.post('/api/v1/ci/poll')).body;
  return { id: job.pipeline_id, steps: job.steps.map((s: { id: number }) => s.id) };
}

async function runStep(step: number, log: string, status: 'success' | 'failure'): Promise<void> {
  expect((await agent.put(`/api/v1/ci/steps/${step}/status`, { status: 'running' })).status).toBe(200);
  if (log !== '') {
    const r = await agent.post(`/api/v1/ci/steps/${step}/log`, log, { 'content-type': 'text/plain' });
    expect(r.status).toBe(200);
  }
  const done = await agent.put(`/api/v1/ci/steps/${step}/status`, {
    status,
    exit_code: status === 'success' ? 0 : 2,
  });
  expect(done.status).toBe(200);
}

async function finish(job: { id: number; steps: number[] }, outcome: 'success' | 'failure'): Promise<void> {
  await runStep(job.steps[0]!, `building <b>${outcome}</b>\nline two\n`, outcome);
  if (outcome === 'success') await runStep(job.steps[1]!, 'testing\n', 'success');
  expect((await agent.put(`/api/v1/ci/pipelines/${job.id}/status`, { status: outcome })).status).toBe(200);
}

const rowStatus = (n: number) => w.page.locator(`tr[data-number="${n}"] .badge.status`);

describe('pipeline pages', () => {
  test('the list refreshes running rows, deletes the selected and all failed pipelines after confirming, and numbers are not reused', async () => {
    const repo = await gitRepo(ts, apiUser(ts, owner), org);
    const list = `${ts.url}/${org}/${repo.name}/-/pipelines`;
    // #1 passed, #2 failed, #3 failed, #4 pending
    for (const [n, outcome] of [
      [1, 'success'],
      [2, 'failure'],
      [3, 'failure'],
    ] as const) {
      await push(repo, n);
      await finish(await claim(), outcome);
    }
    await push(repo, 4);
    const res = await visit(w, list);
    await checkPage(w, res);
    await screenshot(w, 'pipelines-list');
    expect(await rowStatus(4).textContent()).toBe('Pending');
    expect(await rowStatus(2).textContent()).toBe('Failed');
    // a pending row has no selection box; finished rows have
    expect(await w.page.locator('tr[data-number="4"] input[type=checkbox]').count()).toBe(0);

    // the pending row follows the pipeline without a reload
    const job = await claim();
    await w.page.waitForFunction(
      () =>
        (globalThis as any).document.querySelector('tr[data-number="4"] .badge')?.textContent === 'Running',
      undefined,
      { timeout: LIVE_MS },
    );
    await finish(job, 'success');
    await w.page.waitForFunction(
      () =>
        (globalThis as any).document.querySelector('tr[data-number="4"] .badge')?.textContent === 'Passed',
      undefined,
      { timeout: LIVE_MS },
    );

    // the filter is in the URL
    await visit(w, `${list}?status=failure`);
    expect(await w.page.locator('tbody tr').count()).toBe(2);
    await visit(w, list);

    // selected: #1, after a confirmation naming it
    await w.page.getByLabel('Select pipeline #1').check();
    await submit(w, 'Delete selected');
    await expect(w.page.locator('h1').textContent()).resolves.toBe('Delete 1 pipeline?');
    await checkPage(w, await visit(w, w.page.url().replace(/\/delete$/, ''), 200));
    await w.page.getByLabel('Select pipeline #1').check();
    await submit(w, 'Delete selected');
    expect((await submit(w, 'Delete 1 pipeline')).status()).toBe(303);
    await expect(w.page.getByRole('status').textContent()).resolves.toBe('1 pipeline was deleted.');
    expect(await w.page.locator('tr[data-number="1"]').count()).toBe(0);
    expect((await ts.anon.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`)).status).toBe(404);

    // all failed: the count in the link and the confirmation
    await w.page.getByRole('link', { name: 'Delete all failed (2)' }).click();
    await w.page.waitForLoadState('load');
    await checkPage(w, (await w.page.reload())!);
    expect(await w.page.locator('main').textContent()).toContain('with its steps and logs: 2 pipelines now.');
    expect((await submit(w, 'Delete 2 failed pipelines')).status()).toBe(303);
    expect(
      await w.page.locator('tbody tr').evaluateAll((rows) => rows.map((r: any) => r.dataset.number)),
    ).toEqual(['4']);

    // #4 deleted from its own page; the next pipeline is #5
    await visit(w, `${list}/4`);
    await w.page.getByRole('link', { name: 'Delete' }).click();
    await w.page.waitForLoadState('load');
    expect((await submit(w, 'Delete pipeline #4')).status()).toBe(303);
    await push(repo, 5);
    await visit(w, list);
    expect(
      await w.page.locator('tbody tr').evaluateAll((rows) => rows.map((r: any) => r.dataset.number)),
    ).toEqual(['5']);
    // a pending pipeline cannot be deleted: refused in words
    const forced = await w.page.evaluate(async (url: string) => {
      const g = globalThis as any;
      const token = g.document.querySelector('input[name=_csrf]').value;
      const r = await g.fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `_csrf=${encodeURIComponent(token)}&confirm=1&number=5`,
      });
      return { status: r.status, text: await r.text() };
    }, `${list}/delete`);
    expect(forced.status).toBe(409);
    expect(forced.text).toContain('cancel the pipeline first: #5 (pending)');
    expect((await agent.post('/api/v1/ci/poll')).status).toBe(200);
  });

  test('a pipeline page refreshes while it runs, cancels and reruns; a step page shows its log to signed-in users only', async () => {
    const repo = await gitRepo(ts, apiUser(ts, owner), org);
    await push(repo, 1);
    const page = `${ts.url}/${org}/${repo.name}/-/pipelines/1`;
    const res = await visit(w, page);
    await checkPage(w, res);
    const job = await claim();
    await runStep(job.steps[0]!, 'hello from <script>alert(1)</script> the build\n', 'success');
    await w.page.waitForFunction(
      () => (globalThis as any).document.querySelector('.pipeline-summary .badge')?.textContent === 'Running',
      undefined,
      { timeout: LIVE_MS },
    );
    await w.page.getByRole('link', { name: /build/ }).click();
    await w.page.waitForLoadState('load');
    await checkPage(w, (await w.page.reload())!);
    await screenshot(w, 'pipeline-step');
    // the fallback text (the viewer island replaces it when present) holds the log as text
    await expect(w.page.locator('.log-viewer').getAttribute('data-size')).resolves.toBe('47');
    // cancel from the pipeline page
    await visit(w, page);
    expect((await submit(w, 'Cancel')).status()).toBe(303);
    await expect(w.page.locator('.pipeline-summary .badge').first().textContent()).resolves.toBe('Cancelled');
    expect((await submit(w, 'Rerun')).status()).toBe(303);
    expect(w.page.url()).toBe(`${page.slice(0, -1)}2`);

    // without JavaScript the step page shows the end of the log as text
    const plain = await watchedPage(browser, { javaScript: false });
    await signIn(plain, ts.url, owner);
    await visit(plain, `${page}/steps/1`);
    expect(await plain.page.locator('pre.log-text').textContent()).toBe(
      'hello from <script>alert(1)</script> the build\n',
    );
    await plain.context.close();

    // anonymous readers see the pipeline, and are asked to sign in for its log
    const anon = await watchedPage(browser);
    await checkPage(anon, await visit(anon, `${page}/steps/1`));
    await expect(anon.page.locator('.log-signin').textContent()).resolves.toContain(
      'Sign in to read this one.',
    );
    expect(await anon.page.locator('.log-viewer').count()).toBe(0);
    expect(await anon.page.getByRole('button', { name: 'Rerun' }).count()).toBe(0);
    await anon.context.close();
  });

  test('a signed-in non-member sees no controls and is refused (403 public, 404 private)', async () => {
    const pub = await gitRepo(ts, apiUser(ts, owner), org);
    const priv = await gitRepo(ts, apiUser(ts, owner), org, true);
    for (const r of [pub, priv]) {
      await push(r, 1);
      await finish(await claim(), 'failure');
    }
    const o = await watchedPage(browser);
    await signIn(o, ts.url, outsider);
    const list = (r: GitRepo) => `${ts.url}/${org}/${r.name}/-/pipelines`;
    await checkPage(o, await visit(o, list(pub)));
    expect(await o.page.locator('input[type=checkbox]').count()).toBe(0);
    expect(await o.page.getByRole('button', { name: 'Delete selected' }).count()).toBe(0);
    expect(await o.page.getByRole('link', { name: /Delete all failed/ }).count()).toBe(0);
    await visit(o, `${list(pub)}/1`);
    expect(await o.page.getByRole('button', { name: /Rerun|Cancel/ }).count()).toBe(0);
    const post = (url: string, body: string) =>
      o.page.evaluate(
        async ([u, b]) => {
          const g = globalThis as any;
          const token = g.document.querySelector('input[name=_csrf]').value;
          const r = await g.fetch(u, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: `_csrf=${encodeURIComponent(token)}&${b}`,
          });
          return r.status as number;
        },
        [url, body] as const,
      );
    expect(await post(`${list(pub)}/delete`, 'confirm=1&number=1')).toBe(403);
    expect(await post(`${list(pub)}/delete-failed`, 'up_to=1')).toBe(403);
    expect(await post(`${list(pub)}/1/rerun`, '')).toBe(403);
    expect(await post(`${list(priv)}/delete`, 'confirm=1&number=1')).toBe(404);
    await visit(o, list(priv), 404);
    expect((await ts.anon.as(owner.token).get(`/api/v1/repos/${org}/${pub.name}/pipelines/1`)).status).toBe(
      200,
    );
    await o.context.close();
  });
});
