/**
 * Webhooks of a repository and of an organization in a real browser, delivering to a real
 * receiver on loopback: made, pinged (the delivery shows on the webhook's page, with its request
 * and response), redelivered, changed and deleted; the secret is never shown back; members who
 * are not owners are refused.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { newRepo } from '../helpers/factories.ts';
import { Receiver } from '../helpers/receiver.ts';
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

const SECRET = 'hush-hush-4711';

let browser: Browser;
let ts: TestServer;
let rx: Receiver;
let owner: WebUser;
let org: string;
let w: Watched;

beforeAll(async () => {
  browser = await openBrowser();
  // the receiver listens on loopback, which the default policy refuses
  ts = await startTestServer({ TRIAD_WEBHOOK_ALLOWED_HOSTS: '*' });
  rx = await Receiver.start(SECRET);
  owner = await webUser(ts);
  org = await ts.newOrg(apiUser(ts, owner));
  w = await watchedPage(browser);
  await signIn(w, ts.url, owner);
});
afterAll(async () => {
  await w?.context.close();
  await browser?.close();
  await rx?.close();
  await ts?.close();
});

/** Reloads the page until it lists `n` deliveries (a delivery is recorded just after it is sent). */
async function deliveriesShown(n: number): Promise<void> {
  const rows = w.page.locator('table.deliveries tbody tr');
  for (let i = 0; i < 50 && (await rows.count()) < n; i++) {
    await new Promise((r) => setTimeout(r, 100));
    await w.page.reload();
  }
  expect(await rows.count()).toBe(n);
}

/** Adds a webhook with the page's form (the list page is open); answers its id. */
async function addHook(events: string[], secret?: string): Promise<number> {
  const page = w.page;
  await page.getByLabel('Payload URL').fill(rx.url());
  for (const e of ['push', ...events])
    await page.getByLabel(e, { exact: true }).setChecked(events.includes(e));
  if (secret !== undefined) await page.getByLabel('Secret', { exact: true }).fill(secret);
  const res = await submit(w, 'Add webhook');
  expect(res.status()).toBe(303);
  const id = Number(/\/webhooks\/(\d+)$/.exec(res.headers().location ?? '')?.[1]);
  expect(id).toBeGreaterThan(0);
  return id;
}

describe('repository webhooks', () => {
  test('when a webhook is made, pinged, redelivered, changed and deleted in the pages, then the receiver and the API follow, and the secret is never shown', async () => {
    const repo = await newRepo(apiUser(ts, owner), org, { vcs: 'git' });
    const page = w.page;
    const list = `${ts.url}/${org}/${repo.name}/-/settings/webhooks`;
    const res = await visit(w, list);
    await checkPage(w, res);
    await expect(page.locator('main').textContent()).resolves.toContain('has no webhooks');
    const id = await addHook(['push', 'issue.opened'], SECRET);
    const api = ts.anon.as(owner.token);
    const hookApi = `/api/v1/repos/${org}/${repo.name}/webhooks/${id}`;
    expect((await api.get(hookApi)).body.data).toMatchObject({
      url: rx.url(),
      events: ['push', 'issue.opened'],
      is_active: true,
      has_secret: true,
    });
    expect(new URL(page.url()).pathname).toBe(`/${org}/${repo.name}/-/settings/webhooks/${id}`);
    expect(await page.content()).not.toContain(SECRET);
    expect(await page.getByLabel('Secret', { exact: true }).inputValue()).toBe('');
    await expect(page.getByText('A secret is set. Leave this empty to keep it.').count()).resolves.toBe(1);

    // a ping reaches the receiver, signed with the secret, and shows on the page
    expect((await submit(w, 'Ping this webhook')).status()).toBe(303);
    const [ping] = await rx.waitFor(1, (r) => r.event === 'ping');
    expect(ping!.svcValid).toBe(true);
    await deliveriesShown(1);
    const first = page.locator('table.deliveries tbody tr').first();
    await expect(first.textContent()).resolves.toMatch(/ping\s*200\s*1/);
    const shown = await page.reload();
    await screenshot(w, 'webhook');
    await checkPage(w, shown!);

    // its request and response, escaped, without the secret
    await Promise.all([
      page.waitForURL(/\/deliveries\/\d+$/),
      first.getByRole('link', { name: /^Details of the ping delivery/ }).click(),
    ]);
    const detail = await page.reload();
    await checkPage(w, detail!);
    const requestHeaders = (await page.getByRole('region', { name: 'Request headers' }).textContent()) ?? '';
    expect(requestHeaders.toLowerCase()).toContain(`x-svc-delivery: ${ping!.delivery}`);
    const body = JSON.parse((await page.getByRole('region', { name: 'Request body' }).textContent()) ?? '');
    expect(body).toMatchObject({ event: 'ping' });
    expect(await page.getByRole('region', { name: 'Response body' }).textContent()).toBe('ok');
    expect(await page.content()).not.toContain(SECRET);
    await page.goBack();

    // redelivered: the same delivery again, its record marked
    await page.reload();
    expect((await submit(w, /^Redeliver the ping delivery/)).status()).toBe(303);
    const again = await rx.waitFor(2, (r) => r.event === 'ping');
    expect(again[1]!.delivery).toBe(ping!.delivery);
    expect(again[1]!.attempt).toBe(2);
    await deliveriesShown(2);
    await expect(page.locator('table.deliveries tbody tr').first().textContent()).resolves.toContain(
      'redelivery',
    );

    // events changed; a refused change shows the form again without the secret typed
    await page.getByLabel('push', { exact: true }).uncheck();
    await page.getByLabel('tag', { exact: true }).check();
    await page.getByLabel('Payload URL').fill('ftp://example.com/hook');
    await page.getByLabel('Secret', { exact: true }).fill('new-secret-typed');
    const refused = await submit(w, 'Save webhook');
    expect(refused.status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('http or https');
    expect(await page.getByLabel('Payload URL').inputValue()).toBe('ftp://example.com/hook');
    expect(await page.getByLabel('tag', { exact: true }).isChecked()).toBe(true);
    expect(await page.getByLabel('Secret', { exact: true }).inputValue()).toBe('');
    expect(await page.content()).not.toContain('new-secret-typed');
    await page.getByLabel('Payload URL').fill(rx.url('/other'));
    expect((await submit(w, 'Save webhook')).status()).toBe(303);
    const changed = (await api.get(hookApi)).body.data;
    expect({ ...changed, events: [...changed.events].sort() }).toMatchObject({
      url: rx.url('/other'),
      events: ['issue.opened', 'tag'],
      has_secret: true,
    });

    // the list shows it with its last delivery
    await visit(w, list);
    const row = page.locator('tbody tr', { hasText: rx.url('/other') });
    await expect(row.textContent()).resolves.toMatch(/tag, issue\.opened|issue\.opened, tag/);
    await expect(row.textContent()).resolves.toContain('200');

    await Promise.all([page.waitForURL(/\/webhooks\/\d+$/), row.getByRole('link').click()]);
    const removed = await submit(w, 'Delete webhook');
    expect({ status: removed.status(), to: removed.headers().location }).toEqual({
      status: 303,
      to: `/${org}/${repo.name}/-/settings/webhooks`,
    });
    expect((await api.get(hookApi)).status).toBe(404);
    await expect(page.locator('main').textContent()).resolves.toContain('has no webhooks');
  });
});

describe('organization webhooks', () => {
  test('when an organization webhook is made and pinged, then its delivery shows; members who are not owners are refused', async () => {
    const page = w.page;
    const res = await visit(w, `${ts.url}/${org}/-/settings/webhooks`);
    await checkPage(w, res);
    expect(await page.getByRole('link', { name: 'Webhooks' }).getAttribute('aria-current')).toBe('page');
    const id = await addHook(['issue.opened']);
    expect(new URL(page.url()).pathname).toBe(`/${org}/-/settings/webhooks/${id}`);
    await expect(page.getByText('No secret is set.').count()).resolves.toBe(1);
    const before = rx.requests.length;
    await submit(w, 'Ping this webhook');
    await rx.waitFor(before + 1);
    await deliveriesShown(1);
    const api = ts.anon.as(owner.token);
    const hook = (await api.get(`/api/v1/orgs/${org}/webhooks/${id}`)).body.data;
    expect(hook).toMatchObject({ events: ['issue.opened'], has_secret: false });
    expect(hook.last_delivery).toMatchObject({ success: true, response_code: 200 });

    const member = await webUser(ts);
    await ts.addMember(org, apiUser(ts, member));
    const repo = await newRepo(apiUser(ts, owner), org, { vcs: 'hg' });
    const m = await watchedPage(browser, { javaScript: false });
    await signIn(m, ts.url, member);
    await visit(m, `${ts.url}/${org}/-/settings/webhooks`, 403);
    await visit(m, `${ts.url}/${org}/-/settings/webhooks/${id}`, 403);
    await visit(m, `${ts.url}/${org}/${repo.name}/-/settings/webhooks`, 403);
    await m.context.close();
    // an unknown webhook is not found
    await visit(w, `${ts.url}/${org}/-/settings/webhooks/999999`, 404);
    await visit(w, `${ts.url}/${org}/-/settings/webhooks/${id}/deliveries/999999`, 404);
  });
});
