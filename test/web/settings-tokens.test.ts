/**
 * The access tokens page and the user profile in a real browser: a token made in the page works
 * with curl until it is deleted in the page, its value is shown once, an organization token needs
 * its target; a profile shows no e-mail address, and an unknown user is a 404.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
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

const run = promisify(execFile);

let browser: Browser;
let ts: TestServer;

beforeAll(async () => {
  browser = await openBrowser();
  ts = await startTestServer();
});
afterAll(async () => {
  await browser?.close();
  await ts?.close();
});

/** `GET /api/v1/user` with the real curl: the status and the body. */
async function curlUser(token: string): Promise<{ status: number; body: string }> {
  const { stdout } = await run('curl', [
    '-s',
    '-w',
    '\n%{http_code}',
    '-H',
    `Authorization: Bearer ${token}`,
    `${ts.url}/api/v1/user`,
  ]);
  const at = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(at + 1)), body: stdout.slice(0, at) };
}

describe('access tokens', () => {
  let user: WebUser;
  let w: Watched;
  beforeAll(async () => {
    user = await webUser(ts);
    w = await watchedPage(browser);
    await signIn(w, ts.url, user);
  });
  afterAll(async () => {
    await w.context.close();
  });

  test('when a token is made in the page, then its value is shown once, works with curl, and stops working once deleted in the page', async () => {
    const page = w.page;
    const res = await visit(w, `${ts.url}/-/settings/tokens`);
    await checkPage(w, res);
    // the token's target is asked for only for the organization and repository reaches
    expect(await page.getByLabel('Target').isVisible()).toBe(false);
    expect(await page.getByLabel('Expires').inputValue()).toBe('30');
    await page.getByLabel('Name', { exact: true }).fill('laptop curl');
    await page.getByLabel('repo:read').check();
    await page.getByLabel('issues:write').check();
    const made = await submit(w, 'Create token');
    expect(made.status()).toBe(200);
    expect(made.headers()['cache-control']).toBe('no-store');
    const value = await page.getByLabel('The value of token laptop curl').inputValue();
    expect(value).toMatch(/^triad_[0-9a-f]{48}$/);
    expect(await page.getByLabel('The value of token laptop curl').getAttribute('readonly')).not.toBeNull();
    await expect(page.getByRole('status').textContent()).resolves.toContain('will not be shown again');
    expect(await page.locator('button[data-copy]').isVisible()).toBe(true);
    await screenshot(w, 'settings-tokens');
    await checkPage(w, made);

    const row = page.locator('table.list tbody tr', { hasText: 'laptop curl' });
    await expect(row.textContent()).resolves.toMatch(/repo:read\s*issues:write\s*Personal/);
    const ok = await curlUser(value);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body).data.username).toBe(user.username);

    // a reload asks for the list again (the page replaced its history entry): the value is gone
    await page.reload();
    expect(await page.content()).not.toContain(value);
    expect(await page.locator('table.list tbody tr', { hasText: 'laptop curl' }).count()).toBe(1);
    // the next visit does not show it either, and the API knows the token by name only
    await visit(w, `${ts.url}/-/settings/tokens`);
    expect(await page.content()).not.toContain(value);
    const listed = await ts.anon.as(user.token).get('/api/v1/user/tokens');
    expect(listed.body.data.map((t: any) => t.name)).toContain('laptop curl');
    // the last use shows in the list (recorded off the request's path: a moment later)
    const lastUsed = page.locator('table.list tbody tr', { hasText: 'laptop curl' }).locator('td').nth(3);
    for (let i = 0; i < 20 && (await lastUsed.textContent())?.includes('never') === true; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await page.reload();
    }
    await expect(lastUsed.textContent()).resolves.not.toContain('never');

    await Promise.all([
      page.waitForURL(`${ts.url}/-/settings/tokens`),
      page.getByRole('button', { name: 'Delete token laptop curl' }).click(),
    ]);
    expect(await page.locator('table.list tbody tr', { hasText: 'laptop curl' }).count()).toBe(0);
    expect((await curlUser(value)).status).toBe(401);
  });

  test('when an organization token has no target, then the form says so with the name kept; with its organization it is made', async () => {
    const org = `tok${Date.now()}`;
    await ts.newOrg(apiUser(ts, user), org);
    const page = w.page;
    await visit(w, `${ts.url}/-/settings/tokens`);
    await page.getByLabel('Name', { exact: true }).fill('ci for my org');
    await page.getByLabel('repo:write').check();
    await page.getByLabel('Reach').selectOption('org');
    expect(await page.getByLabel('Target').isVisible()).toBe(true);
    // the browser would insist on the target (required once shown): the server is asked without it
    await page.getByLabel('Target').evaluate((el: any) => (el.required = false));
    const refused = await submit(w, 'Create token');
    expect(refused.status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'organization token needs a target',
    );
    expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe('ci for my org');
    expect(await page.getByLabel('repo:write').isChecked()).toBe(true);
    expect(await page.getByLabel('Reach').inputValue()).toBe('org');

    // an organization the user is not in is the form's mistake too
    await page.getByLabel('Target').fill('no-such-org');
    expect((await submit(w, 'Create token')).status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('Target');

    await page.getByLabel('Target').fill(org);
    expect((await submit(w, 'Create token')).status()).toBe(200);
    const value = await page.getByLabel('The value of token ci for my org').inputValue();
    await expect(
      page.locator('table.list tbody tr', { hasText: 'ci for my org' }).textContent(),
    ).resolves.toContain(`Organization ${org}`);
    // the token reaches its organization only
    const c = ts.anon.as(value);
    expect((await c.get(`/api/v1/user/orgs`)).body.data.map((o: any) => o.name)).toEqual([org]);
  });

  test('when script is off, then the target is shown, and a personal token with a target is refused', async () => {
    const nojs = await watchedPage(browser, { javaScript: false });
    await signIn(nojs, ts.url, user);
    await visit(nojs, `${ts.url}/-/settings/tokens`);
    const page = nojs.page;
    expect(await page.getByLabel('Target').isVisible()).toBe(true);
    await page.getByLabel('Name', { exact: true }).fill('mistaken');
    await page.getByLabel(/^admin —/).check();
    await page.getByLabel('Target').fill('someorg');
    expect((await submit(nojs, 'Create token')).status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'personal token reaches everything',
    );
    expect(await page.getByLabel('Target').inputValue()).toBe('someorg');
    // no scope at all is refused too
    await page.getByLabel(/^admin —/).uncheck();
    await page.getByLabel('Target').fill('');
    expect((await submit(nojs, 'Create token')).status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('at least one scope');
    await nojs.context.close();
  });
});

describe('profiles', () => {
  test('when a user looks at a profile, then it shows the name and when they joined, no e-mail; their own has their settings', async () => {
    const user = await webUser(ts);
    const other = await webUser(ts);
    const w = await watchedPage(browser, { javaScript: false });
    // anyone may look, signed in or not
    await visit(w, `${ts.url}/-/users/${other.username}`);
    expect(await w.page.getByRole('heading', { level: 1 }).textContent()).toBe(`${other.username} Display`);
    const text = (await w.page.locator('main').textContent()) ?? '';
    expect(text).toContain(other.username);
    expect(text).toMatch(/Joined just now|Joined \d+ (second|minute)s? ago/);
    expect(await w.page.content()).not.toContain('@example.test');
    expect(await w.page.getByRole('link', { name: 'Access tokens' }).count()).toBe(0);

    await w.context.close();

    // (axe runs in the page: the checked page has script on)
    const me = await watchedPage(browser);
    await signIn(me, ts.url, user);
    const res = await visit(me, `${ts.url}/-/users/${user.username}`);
    await checkPage(me, res);
    expect(await me.page.locator('main').getByRole('link', { name: 'Access tokens' }).count()).toBe(1);
    expect(await me.page.content()).not.toContain('@example.test');
    await visit(me, `${ts.url}/-/users/nobody-${Date.now()}`, 404);
    await me.context.close();
  });
});
