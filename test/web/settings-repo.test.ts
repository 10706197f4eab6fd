/**
 * A repository's settings page in a real browser: its owners change the description and the
 * visibility (the API shows them) and delete it by typing its full name; members are refused,
 * strangers do not see a private repository's page at all.
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

describe('repository settings', () => {
  test('when the owner saves the description and privacy, then the API shows them; a wrong name refuses the deletion, the right one deletes', async () => {
    const repo = await newRepo(apiUser(ts, owner), org, { vcs: 'git' });
    const w = await watchedPage(browser);
    await signIn(w, ts.url, owner);
    const url = `${ts.url}/${org}/${repo.name}/-/settings`;
    const res = await visit(w, url);
    await checkPage(w, res);
    const page = w.page;
    expect(await page.getByRole('link', { name: 'Settings' }).getAttribute('aria-current')).toBe('page');
    expect(await page.getByRole('link', { name: 'General' }).getAttribute('aria-current')).toBe('page');
    expect(await page.getByRole('link', { name: 'Webhooks' }).getAttribute('href')).toBe(
      `/${org}/${repo.name}/-/settings/webhooks`,
    );

    await page.getByLabel('Description').fill('Now with <b>words</b>');
    await page.getByLabel(/^Private/).check();
    expect((await submit(w, 'Save')).status()).toBe(303);
    expect(new URL(page.url()).search).toBe('?saved=1');
    await expect(page.getByRole('status').textContent()).resolves.toContain('saved');
    const api = ts.anon.as(owner.token);
    expect((await api.get(`/api/v1/repos/${org}/${repo.name}`)).body.data).toMatchObject({
      description: 'Now with <b>words</b>',
      is_private: true,
    });
    expect(await page.getByLabel('Description').inputValue()).toBe('Now with <b>words</b>');
    expect(await page.getByLabel(/^Private/).isChecked()).toBe(true);
    await screenshot(w, 'repo-settings');

    // made public again
    await page.getByLabel(/^Private/).uncheck();
    await submit(w, 'Save');
    expect((await api.get(`/api/v1/repos/${org}/${repo.name}`)).body.data.is_private).toBe(false);

    // a name that is not the repository's: refused, the description stays as stored
    await page.getByLabel(`Type ${org}/${repo.name} to confirm`).fill(repo.name);
    const refused = await submit(w, 'Delete this repository');
    expect(refused.status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('was not deleted');
    expect(await page.getByLabel(`Type ${org}/${repo.name} to confirm`).inputValue()).toBe(repo.name);
    expect(await page.getByLabel('Description').inputValue()).toBe('Now with <b>words</b>');
    expect((await api.get(`/api/v1/repos/${org}/${repo.name}`)).status).toBe(200);

    await page.getByLabel(`Type ${org}/${repo.name} to confirm`).fill(`${org}/${repo.name}`);
    const deleted = await submit(w, 'Delete this repository');
    expect({ status: deleted.status(), to: deleted.headers().location }).toEqual({
      status: 303,
      to: `/${org}`,
    });
    expect(new URL(page.url()).pathname).toBe(`/${org}`);
    expect((await api.get(`/api/v1/repos/${org}/${repo.name}`)).status).toBe(404);
    await w.context.close();
  });

  test('when a member who is not an owner opens the settings, then they are refused; a stranger does not see a private repository', async () => {
    const open = await newRepo(apiUser(ts, owner), org, { vcs: 'hg' });
    const closed = await newRepo(apiUser(ts, owner), org, { vcs: 'fossil', isPrivate: true });
    const m = await watchedPage(browser, { javaScript: false });
    await signIn(m, ts.url, member);
    await visit(m, `${ts.url}/${org}/${open.name}/-/settings`, 403);
    await visit(m, `${ts.url}/${org}/${closed.name}/-/settings`, 403);
    await m.context.close();

    const stranger = await webUser(ts);
    const s = await watchedPage(browser, { javaScript: false });
    await signIn(s, ts.url, stranger);
    await visit(s, `${ts.url}/${org}/${open.name}/-/settings`, 403);
    await visit(s, `${ts.url}/${org}/${closed.name}/-/settings`, 404);
    await s.context.close();

    // nobody signed in: the sign-in page first
    const anon = await watchedPage(browser, { javaScript: false });
    await visit(anon, `${ts.url}/${org}/${open.name}/-/settings`);
    expect(new URL(anon.page.url()).pathname).toBe('/-/login');
    await anon.context.close();
    for (const r of [open, closed]) {
      expect((await ts.anon.as(owner.token).get(`/api/v1/repos/${org}/${r.name}`)).status).toBe(200);
    }
  });
});
