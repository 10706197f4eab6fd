/**
 * The global pages (start page, explore, organization, forms of the account) in a real browser:
 * every page keeps the rules (CSP, axe, keyboard), read pages work without JavaScript, and a
 * private repository stays out of every list a stranger sees.
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
  type WebUser,
} from '../helpers/browser.ts';

let browser: Browser;
let ts: TestServer;
let owner: WebUser;
let org: string;
const publicRepo = uniq('shown');
const privateRepo = uniq('hidden');

beforeAll(async () => {
  browser = await openBrowser();
  ts = await startTestServer();
  owner = await webUser(ts);
  org = uniq('org');
  const client = ts.anon.as(owner.token);
  expect(
    (await client.post('/api/v1/orgs', { name: org, description: 'An <b>org</b> of tests' })).status,
  ).toBe(201);
  for (const [name, isPrivate] of [
    [publicRepo, false],
    [privateRepo, true],
  ] as const) {
    const r = await client.post(`/api/v1/orgs/${org}/repos`, {
      name,
      vcs: 'git',
      is_private: isPrivate,
      description: `about ${name}`,
    });
    expect(r.status).toBe(201);
  }
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

describe('pages anyone may open', () => {
  test('when an anonymous visitor opens the start page, explore and an organization, then public repositories show and private ones do not', async () => {
    const w = await watchedPage(browser);
    for (const path of ['/', '/-/explore', `/${org}`]) {
      const res = await visit(w, `${ts.url}${path}`);
      await checkPage(w, res);
      const text = await w.page.locator('main').innerText();
      expect(text).toContain(`${org}/${publicRepo}`);
      expect(text).not.toContain(privateRepo);
    }
    // the description is text, never markup
    expect(await w.page.locator('main').innerText()).toContain('An <b>org</b> of tests');
    await w.context.close();
  });

  test('when script is off, then the read pages render the same content', async () => {
    const w = await watchedPage(browser, { javaScript: false });
    for (const path of ['/', '/-/explore', `/${org}`, '/-/login']) {
      await visit(w, `${ts.url}${path}`);
      expect(await w.page.locator('main h1').count()).toBeGreaterThan(0);
    }
    expect(await w.page.locator('main').innerText()).toContain('Sign in to Triad');
    await w.context.close();
  });

  test('when a page does not exist, then it is an HTML 404 with the same headers', async () => {
    const w = await watchedPage(browser);
    for (const path of [
      '/-/nothing-here',
      `/${org}/-/nothing`,
      `/${org}/${publicRepo}/-/nothing`,
      '/no-such-org',
    ]) {
      const res = await visit(w, `${ts.url}${path}`, 404);
      await checkPage(w, res, { keyboard: false });
      expect(await w.page.locator('h1').innerText()).toBe('Not found');
    }
    await w.context.close();
  });
});

describe('signed-in pages', () => {
  test('when a member signs in, then the start page lists their organizations and repositories, private ones too', async () => {
    const w = await watchedPage(browser);
    await signIn(w, ts.url, owner);
    const res = await visit(w, `${ts.url}/`);
    await checkPage(w, res);
    const text = await w.page.locator('main').innerText();
    expect(text).toContain(org);
    expect(text).toContain(`${org}/${privateRepo}`);
    expect(text).toContain('Private');
    await screenshot(w, 'home');
    const orgPage = await visit(w, `${ts.url}/${org}`);
    await checkPage(w, orgPage);
    expect(await w.page.locator('main').innerText()).toContain(privateRepo);
    await screenshot(w, 'org');
    await w.context.close();
  });

  test('when a signed-in stranger looks, then the private repository is in no list', async () => {
    const stranger = await webUser(ts);
    const w = await watchedPage(browser);
    await signIn(w, ts.url, stranger);
    for (const path of ['/', '/-/explore', `/${org}`]) {
      await visit(w, `${ts.url}${path}`);
      expect(await w.page.locator('main').innerText()).not.toContain(privateRepo);
    }
    await w.context.close();
  });

  test('when a user creates an organization with the form, then they own it; a bad or taken name is shown again with the text kept', async () => {
    const user = await webUser(ts);
    const w = await watchedPage(browser);
    await signIn(w, ts.url, user);
    const form = await visit(w, `${ts.url}/-/new/org`);
    await checkPage(w, form);
    await w.page.getByLabel('Name', { exact: true }).fill('-bad-');
    await w.page.getByLabel('Description').fill('first try');
    const [bad] = await Promise.all([
      w.page.waitForResponse((r) => r.request().method() === 'POST'),
      w.page.getByRole('button', { name: 'Create organization' }).click(),
    ]);
    expect(bad.status()).toBe(400);
    expect(await w.page.getByRole('alert').innerText()).toContain('form.name');
    expect(await w.page.getByLabel('Description').inputValue()).toBe('first try');
    await w.page.getByLabel('Name', { exact: true }).fill(org.toUpperCase());
    const [taken] = await Promise.all([
      w.page.waitForResponse((r) => r.request().method() === 'POST'),
      w.page.getByRole('button', { name: 'Create organization' }).click(),
    ]);
    expect(taken.status()).toBe(409);
    const name = uniq('made');
    await w.page.getByLabel('Name', { exact: true }).fill(name);
    await Promise.all([
      w.page.waitForURL(`${ts.url}/${name}`),
      w.page.getByRole('button', { name: 'Create organization' }).click(),
    ]);
    const members = await ts.anon.as(user.token).get(`/api/v1/orgs/${name}/members`);
    expect(members.body.data).toEqual([
      expect.objectContaining({ role: 'owner', user: expect.objectContaining({ username: user.username }) }),
    ]);
    expect(await w.page.locator('main').innerText()).toContain('first try');
    await w.context.close();
  });

  test('when a user opens the password page, then it keeps the rules and asks for the current password', async () => {
    const w = await watchedPage(browser);
    await signIn(w, ts.url, owner);
    const res = await visit(w, `${ts.url}/-/settings/password`);
    await checkPage(w, res);
    expect(await w.page.getByLabel('Current password').count()).toBe(1);
    await w.context.close();
  });

  test('when an anonymous visitor opens a settings page, then it asks to sign in first and comes back', async () => {
    const w = await watchedPage(browser);
    await visit(w, `${ts.url}/-/settings/password`);
    expect(new URL(w.page.url()).pathname).toBe('/-/login');
    expect(new URL(w.page.url()).searchParams.get('return_to')).toBe('/-/settings/password');
    await w.context.close();
  });
});
