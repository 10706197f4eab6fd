/**
 * Organizations in a real browser: one made with its form, repositories of each kind made with
 * the new repository form (the API shows them), and the members page: owners add, promote, demote
 * and remove members (never the last owner), members only read, strangers are refused.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, uniq, type TestServer } from '../helpers/server.ts';
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
let w: Watched;
let org: string;

beforeAll(async () => {
  browser = await openBrowser();
  ts = await startTestServer();
  owner = await webUser(ts);
  w = await watchedPage(browser);
  await signIn(w, ts.url, owner);
});
afterAll(async () => {
  await w?.context.close();
  await browser?.close();
  await ts?.close();
});

describe('organizations and repositories', () => {
  test('when an organization is made with its form, then repositories of each kind are made in it with the new repository form', async () => {
    org = uniq('acme');
    await visit(w, `${ts.url}/-/new/org`);
    await w.page.getByLabel('Name', { exact: true }).fill(org);
    await Promise.all([
      w.page.waitForURL(`${ts.url}/${org}`),
      w.page.getByRole('button', { name: 'Create organization' }).click(),
    ]);
    await Promise.all([
      w.page.waitForURL(`${ts.url}/-/new/repo?org=${org}`),
      w.page.getByRole('link', { name: 'New repository' }).last().click(),
    ]);
    const page = await w.page.reload();
    await checkPage(w, page!);
    expect(await w.page.getByLabel('Organization', { exact: true }).inputValue()).toBe(org);
    // Mercurial is chosen unless the user picks another kind, as in the API
    expect(await w.page.getByLabel(/^Mercurial/).isChecked()).toBe(true);
    await screenshot(w, 'new-repo');

    // (each in a page of its own, closed after the answer: the repository's address is not this
    // worktree's page, and a private one's asks the browser for credentials)
    for (const [kind, label, isPrivate] of [
      ['git', /^Git/, false],
      ['hg', /^Mercurial/, true],
      ['fossil', /^Fossil/, false],
    ] as const) {
      const one: Watched = { ...w, page: await w.context.newPage() };
      await visit(one, `${ts.url}/-/new/repo?org=${org}`);
      const name = `app-${kind}`;
      await one.page.getByLabel('Name', { exact: true }).fill(name);
      await one.page.getByLabel('Description').fill(`the ${kind} one`);
      await one.page.getByLabel(label).check();
      if (isPrivate) await one.page.getByLabel(/^Private/).check();
      const res = await submit(one, 'Create repository', { follow: false });
      await one.page.close();
      expect({ kind, status: res.status(), to: res.headers().location }).toEqual({
        kind,
        status: 303,
        to: `/${org}/${name}`,
      });
      const api = await ts.anon.as(owner.token).get(`/api/v1/repos/${org}/${name}`);
      expect(api.body.data).toMatchObject({
        vcs: kind,
        description: `the ${kind} one`,
        is_private: isPrivate,
      });
    }

    // a name taken in the organization: the form again, with what was typed
    await visit(w, `${ts.url}/-/new/repo`);
    await w.page.getByLabel('Name', { exact: true }).fill('app-git');
    await w.page.getByLabel('Description').fill('again');
    await w.page.getByLabel(/^Fossil/).check();
    const taken = await submit(w, 'Create repository');
    expect(taken.status()).toBe(409);
    await expect(w.page.getByRole('alert').textContent()).resolves.toContain('already exists');
    expect(await w.page.getByLabel('Description').inputValue()).toBe('again');
    expect(await w.page.getByLabel(/^Fossil/).isChecked()).toBe(true);
    // four pages made and checked (axe, keyboard) in a real browser: over a minute on a loaded machine
  }, 150_000);

  test('when a user in no organization opens the form, then it says to make an organization first', async () => {
    const lonely = await webUser(ts);
    const l = await watchedPage(browser, { javaScript: false });
    await signIn(l, ts.url, lonely);
    await visit(l, `${ts.url}/-/new/repo`);
    expect(await l.page.getByRole('link', { name: 'Create an organization' }).getAttribute('href')).toBe(
      '/-/new/org',
    );
    expect(await l.page.getByRole('button', { name: 'Create repository' }).count()).toBe(0);
    await l.context.close();
  });
});

describe('members', () => {
  test('when the owner adds a member, changes the role and removes them, then the list and the API follow; the last owner stays', async () => {
    const bob = await webUser(ts);
    const page = w.page;
    const res = await visit(w, `${ts.url}/${org}/-/members`);
    await checkPage(w, res);

    // an unknown user: the form says so, with the name kept
    await page.getByLabel('Username').fill('nobody-here');
    expect((await submit(w, 'Add member')).status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('There is no user "nobody-here"');
    expect(await page.getByLabel('Username').inputValue()).toBe('nobody-here');

    await page.getByLabel('Username').fill(bob.username);
    expect((await submit(w, 'Add member')).status()).toBe(303);
    const members = async () =>
      Object.fromEntries(
        (await ts.anon.as(owner.token).get(`/api/v1/orgs/${org}/members`)).body.data.map((m: any) => [
          m.user.username,
          m.role,
        ]),
      );
    expect(await members()).toEqual({ [owner.username]: 'owner', [bob.username]: 'member' });
    const row = page.locator('tbody tr', { hasText: bob.username });
    expect(await row.getByRole('link', { name: bob.username }).getAttribute('href')).toBe(
      `/-/users/${bob.username}`,
    );
    expect(await row.textContent()).toContain(`${bob.username} Display`);

    await page.getByLabel(`Role of ${bob.username}`, { exact: true }).selectOption('owner');
    expect((await submit(w, `Change role of ${bob.username}`)).status()).toBe(303);
    expect((await members())[bob.username]).toBe('owner');
    expect(await page.getByLabel(`Role of ${bob.username}`, { exact: true }).inputValue()).toBe('owner');
    await screenshot(w, 'org-members');

    expect((await submit(w, `Remove ${bob.username} from ${org}`)).status()).toBe(303);
    expect(await members()).toEqual({ [owner.username]: 'owner' });
    expect(await page.locator('tbody tr', { hasText: bob.username }).count()).toBe(0);

    // the last owner can be neither demoted nor removed: the page says why
    await page.getByLabel(`Role of ${owner.username}`, { exact: true }).selectOption('member');
    const demote = await submit(w, `Change role of ${owner.username}`);
    expect(demote.status()).toBe(409);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('at least one owner');
    const remove = await submit(w, `Remove ${owner.username} from ${org}`);
    expect(remove.status()).toBe(409);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('at least one owner');
    expect(await members()).toEqual({ [owner.username]: 'owner' });
  });

  test('when a member looks, then they see the list without its controls; a stranger is refused, an unknown organization is not found', async () => {
    const carol = await webUser(ts);
    const stranger = await webUser(ts);
    await ts.addMember(org, apiUser(ts, carol));
    const c = await watchedPage(browser, { javaScript: false });
    await signIn(c, ts.url, carol);
    await visit(c, `${ts.url}/${org}/-/members`);
    const text = (await c.page.locator('tbody').textContent()) ?? '';
    expect(text).toContain(owner.username);
    expect(text).toContain(carol.username);
    expect(
      await c.page
        .getByRole('button')
        .filter({ hasText: /Change role|Remove|Add member/ })
        .count(),
    ).toBe(0);
    expect(await c.page.locator('select').count()).toBe(0);
    // a member's form posted anyway is refused (owners only)
    const token = await c.page.locator('input[name="_csrf"]').first().inputValue();
    const cookie = (await c.context.cookies(ts.url)).find((k) => k.name === 'triad_session')!;
    const forged = await fetch(`${ts.url}/${org}/-/members`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: `triad_session=${cookie.value}`,
        'content-type': 'application/x-www-form-urlencoded',
        'sec-fetch-site': 'same-origin',
      },
      body: new URLSearchParams({ _csrf: token, username: carol.username, role: 'owner' }).toString(),
    });
    const status = forged.status;
    expect(status).toBe(403);
    await c.context.close();

    const s = await watchedPage(browser);
    await signIn(s, ts.url, stranger);
    await visit(s, `${ts.url}/${org}/-/members`, 403);
    await visit(s, `${ts.url}/no-such-org-${Date.now()}/-/members`, 404);
    await s.context.close();
    // signed out: sign in first
    const anon = await watchedPage(browser);
    await visit(anon, `${ts.url}/${org}/-/members`);
    expect(new URL(anon.page.url()).pathname).toBe('/-/login');
    await anon.context.close();
  });
});
