/**
 * A repository's protected refs in a real browser: an owner adds a rule (the API shows it, and a
 * refused form keeps what was typed) and deletes it; a member is refused the page.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { newRepo } from '../helpers/factories.ts';
import {
  checkPage,
  openBrowser,
  screenshot,
  signIn,
  visit,
  watchedPage,
  webUser,
  type WebUser,
} from '../helpers/browser.ts';
import { apiUser, submit } from './settings-helpers.ts';

let browser: Browser;
let ts: TestServer;
let owner: WebUser;
let member: WebUser;
let org: string;

beforeAll(async () => {
  browser = await openBrowser();
  ts = await startTestServer();
  owner = await webUser(ts);
  member = await webUser(ts);
  org = await ts.newOrg(apiUser(ts, owner));
  await ts.addMember(org, apiUser(ts, member));
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

describe('protected refs settings', () => {
  test('when the owner adds a rule and deletes it, then the API shows each change', async () => {
    const repo = await newRepo(apiUser(ts, owner), org, { vcs: 'git' });
    const api = ts.anon.as(owner.token);
    const w = await watchedPage(browser);
    await signIn(w, ts.url, owner);
    const res = await visit(w, `${ts.url}/${org}/${repo.name}/-/settings/protections`);
    await checkPage(w, res);
    const page = w.page;
    expect(await page.getByRole('link', { name: 'Protected refs' }).getAttribute('aria-current')).toBe(
      'page',
    );
    await expect(page.getByText('No branch or bookmark is protected.').count()).resolves.toBe(1);

    // a user who does not exist: refused, what was typed stays
    await page.getByLabel('Branch or bookmark pattern').fill('release/*');
    await page.getByLabel('Who may push', { exact: true }).selectOption('users');
    await page.getByLabel(/^Users who may push/).fill(`${member.username}, nobody-by-this-name`);
    const refused = await submit(w, 'Add rule');
    expect(refused.status()).toBe(422);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('nobody-by-this-name');
    expect(await page.getByLabel('Branch or bookmark pattern').inputValue()).toBe('release/*');

    await page.getByLabel(/^Users who may push/).fill(member.username);
    await page.getByLabel(/^Allow deletion/).check();
    await page.getByLabel(/^Fast-forward only/).uncheck();
    await page.getByLabel(/^Require a passing pipeline/).check();
    await page.getByLabel('Required status contexts').fill('ci/lint, deploy/preview');
    expect((await submit(w, 'Add rule')).status()).toBe(303);
    const rules = (await api.get(`${repo.api}/protections`)).body.data;
    expect(rules).toEqual([
      expect.objectContaining({
        pattern: 'release/*',
        push: { users: [member.username] },
        fast_forward_only: false,
        allow_deletion: true,
        require_pipeline: true,
        required_contexts: ['ci/lint', 'deploy/preview'],
      }),
    ]);
    const row = page.getByRole('row', { name: /release\/\*/ });
    await expect(row.textContent()).resolves.toContain(member.username);
    await checkPage(w, await visit(w, page.url()));
    await screenshot(w, 'repo-protections');

    expect((await submit(w, 'Delete the rule release/*')).status()).toBe(303);
    expect((await api.get(`${repo.api}/protections`)).body.data).toEqual([]);
  });

  test('when a member opens the page, then it is refused', async () => {
    const repo = await newRepo(apiUser(ts, owner), org, { vcs: 'git' });
    const w = await watchedPage(browser);
    await signIn(w, ts.url, member);
    await visit(w, `${ts.url}/${org}/${repo.name}/-/settings/protections`, 403);
  });
});
