/**
 * Who sees and does what on the releases pages, in a real browser: a draft made in the page is
 * seen by organization members only (404 for strangers and anonymous visitors, in the list too)
 * and a member who is not an owner publishes it; strangers see no form, link or button that
 * changes anything, and get the 403 page when they send the forms anyway; hostile release names,
 * notes, tags, asset names and labels show as text on every releases page.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { APIResponse } from 'playwright-core';
import {
  checkPage,
  expectInert,
  visit,
  watchedPage,
  webUser,
  type Watched,
  type WebUser,
} from '../helpers/browser.ts';
import { postMultipart } from '../helpers/multipart.ts';
import { signedIn } from './code-fixture.ts';
import { apiUser, submit } from './settings-helpers.ts';
import { closeFixture, formToken, mainText, releasesFixture, type Fixture } from './releases-fixture.ts';

const SCRIPT = '<script>alert(1)</script>';
const NOTES = `# Notes ${SCRIPT}

${SCRIPT}
<img src=x onerror=alert(1)>
<a href="javascript:alert(1)">raw link</a>

[js link](javascript:alert(1)) ![js image](javascript:alert(1)) ![ext](https://example.invalid/x.png)
`;
const TITLE = `"><img src=x onerror=alert(1)> ${SCRIPT}`;
const TAG = 'x"><img-src=x-onerror=alert(1)>';
const FILE_NAME = '<img src=x onerror=alert(1)>.txt';
const ASSET_NAME = '"><svg onload=alert(1)>.bin';
const LABEL = `${SCRIPT} <i onmouseover=alert(1)>label</i>`;

let f: Fixture;
let owner: Watched;
let member: WebUser;
let stranger: WebUser;
/** A published release with one asset, made through the API. */
let pub: { id: number; asset: number };

beforeAll(async () => {
  f = await releasesFixture();
  member = await webUser(f.ts);
  await f.ts.addMember(f.W.org, apiUser(f.ts, member));
  stranger = await webUser(f.ts);
  owner = await signedIn(f.browser, f.ts, f.W.user);
  const rel = await f.W.owner.client.post(`${f.api}/releases`, { tag_name: 'v1.0', name: 'One' });
  const up = await postMultipart(`${f.ts.url}${f.api}/releases/${rel.body.data.id}/assets`, f.W.owner.token, [
    { field: 'attachment', filename: 'one.txt', data: Buffer.from('one\n') },
  ]);
  pub = { id: rel.body.data.id, asset: up.body.data.id };
}, 120_000);
afterAll(async () => {
  await owner?.context.close();
  await closeFixture(f);
});

async function tagNames(): Promise<string[]> {
  return (await f.W.owner.client.get(`${f.api}/tags`)).body.data.map((t: { name: string }) => t.name);
}

async function releaseNames(w: Watched): Promise<string[]> {
  await visit(w, `${f.base}/-/releases`);
  return w.page.locator('.release-name').allTextContents();
}

describe('drafts', () => {
  test('when a draft is made in the page, then only members see it, and a member who is no owner publishes it', async () => {
    const page = owner.page;
    await visit(owner, `${f.base}/-/releases/new`);
    await page.getByLabel('Tag', { exact: true }).fill('v3.0');
    await page.getByLabel('Target of a new tag').selectOption('feature/x');
    await page.getByLabel('Title').fill('Coming soon');
    await page.getByLabel(/^Draft/).check();
    const made = await submit(owner, 'Create release');
    expect(made.status()).toBe(303);
    const id = Number(/\/releases\/(\d+)/.exec(made.headers().location ?? '')?.[1]);
    expect(await page.locator('h1').textContent()).toMatch(/^Coming soon\s*Draft$/);
    expect(await mainText(owner)).toContain(
      'The source archives come with the tag, once the release is published.',
    );
    await checkPage(owner, (await page.reload())!);
    expect(await tagNames()).not.toContain('v3.0');

    // anonymous visitors and strangers: not in the list, 404 for the page and its file route
    const anon = await watchedPage(f.browser, { javaScript: false });
    expect(await releaseNames(anon)).toEqual(['One']);
    await visit(anon, `${f.base}/-/releases/${id}`, 404);
    const other = await signedIn(f.browser, f.ts, stranger, false);
    expect(await releaseNames(other)).toEqual(['One']);
    await visit(other, `${f.base}/-/releases/${id}`, 404);
    // (a form is refused before any release is looked up, draft or not: 403, as the API's PATCH)
    await visit(other, `${f.base}/-/releases/${id}/edit`, 403);
    await anon.context.close();
    await other.context.close();

    // a member: the draft in the list, and the forms; publishing creates the tag at its target
    const m = await signedIn(f.browser, f.ts, member);
    expect(await releaseNames(m)).toEqual(['Coming soon', 'One']);
    expect(
      await m.page.locator('.release-list li', { hasText: 'Coming soon' }).locator('.badge.draft').count(),
    ).toBe(1);
    await visit(m, `${f.base}/-/releases/${id}/edit`);
    expect(await m.page.getByLabel(/^Draft/).isChecked()).toBe(true);
    await m.page.getByLabel(/^Draft/).uncheck();
    expect((await submit(m, 'Save release')).status()).toBe(303);
    expect(await m.page.locator('h1').textContent()).toMatch(/^Coming soon\s*Latest$/);
    expect(await tagNames()).toContain('v3.0');
    const api = (await f.W.owner.client.get(`${f.api}/releases/${id}`)).body.data;
    expect(api).toMatchObject({ draft: false, target_commitish: 'feature/x' });
    expect(api.published_at).not.toBeNull();
    await m.context.close();
  });
});

describe('strangers', () => {
  test('when a signed-in stranger opens the pages, then nothing that changes a release is shown, and forcing it is the 403 page', async () => {
    const w = await signedIn(f.browser, f.ts, stranger);
    const page = w.page;
    const list = await visit(w, `${f.base}/-/releases`);
    expect(await page.getByRole('link', { name: 'New release' }).count()).toBe(0);
    await checkPage(w, list);
    const one = await visit(w, `${f.base}/-/releases/${pub.id}`);
    expect(await page.locator('table.assets a', { hasText: 'one.txt' }).count()).toBe(1);
    for (const name of ['Edit', 'Delete', 'Delete one.txt']) {
      expect(await page.getByRole('link', { name, exact: true }).count()).toBe(0);
    }
    expect(await page.locator('form[data-upload]').count()).toBe(0);
    await checkPage(w, one);

    const rel = `${f.base}/-/releases/${pub.id}`;
    for (const path of ['/-/releases/new', `/-/releases/${pub.id}/edit`, `/-/releases/${pub.id}/delete`]) {
      await visit(w, `${f.base}${path}`, 403);
    }
    await visit(w, `${rel}/assets/${pub.asset}/delete`, 403);
    // the forms sent anyway, with the stranger's own valid form token
    await visit(w, `${f.base}/-/releases`);
    const token = await formToken(w);
    const post = (url: string, form: Record<string, string>): Promise<APIResponse> =>
      page.request.post(url, {
        form: { _csrf: token, ...form },
        headers: { 'sec-fetch-site': 'same-origin' },
        maxRedirects: 0,
      });
    const refused = [
      await post(`${f.base}/-/releases/new`, { tag_name: 'v9', target_commitish: 'main' }),
      await post(`${rel}/edit`, { tag_name: 'v1.0', name: 'Taken' }),
      await post(`${rel}/delete`, {}),
      await post(`${rel}/assets/${pub.asset}/delete`, {}),
      await page.request.post(`${rel}/assets`, {
        multipart: {
          _csrf: token,
          attachment: { name: 'x.bin', mimeType: 'text/plain', buffer: Buffer.from('x') },
        },
        headers: { 'sec-fetch-site': 'same-origin' },
        maxRedirects: 0,
      }),
    ];
    for (const r of refused) {
      expect({ url: r.url(), status: r.status() }).toEqual({ url: r.url(), status: 403 });
      expect(await r.text()).toContain('<h1>Forbidden</h1>');
    }
    const after = (await f.W.owner.client.get(`${f.api}/releases/${pub.id}`)).body.data;
    expect(after).toMatchObject({ name: 'One', tag_name: 'v1.0' });
    expect(after.assets.map((a: { name: string }) => a.name)).toEqual(['one.txt']);
    expect(await tagNames()).not.toContain('v9');
    await w.context.close();

    // anonymous visitors are sent to sign in
    const anon = await watchedPage(f.browser);
    await visit(anon, `${f.base}/-/releases/${pub.id}`);
    expect(await anon.page.getByRole('link', { name: 'Edit', exact: true }).count()).toBe(0);
    await anon.page.goto(`${f.base}/-/releases/new`);
    expect(new URL(anon.page.url()).pathname).toBe('/-/login');
    await anon.context.close();
  });
});

describe('markup in releases', () => {
  test('hostile titles, notes, tags, asset names and labels show as text on every releases page', async () => {
    const page = owner.page;
    await visit(owner, `${f.base}/-/releases/new`);
    await page.getByLabel('Tag', { exact: true }).fill(TAG);
    await page.getByLabel('Title').fill(TITLE);
    await page.getByLabel('Release notes', { exact: true }).fill(NOTES);
    expect((await submit(owner, 'Create release')).status()).toBe(303);
    const detail = page.url();
    await page.getByLabel('File', { exact: true }).setInputFiles({
      name: FILE_NAME,
      mimeType: 'text/plain',
      buffer: Buffer.from(`${SCRIPT}\n`),
    });
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    await page.locator('[data-upload-status]', { hasText: 'Uploaded' }).waitFor();
    await page.getByLabel('File', { exact: true }).setInputFiles({
      name: 'plain.bin',
      mimeType: 'application/octet-stream',
      buffer: Buffer.from('plain\n'),
    });
    await page.getByLabel('Name (optional)').fill(ASSET_NAME);
    await page.getByLabel('Label (optional)').fill(LABEL);
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    await page.locator('[data-upload-status]', { hasText: 'Uploaded' }).waitFor();
    await expectInert(owner);

    const shown = await visit(owner, detail);
    expect(await page.locator('.heading-row h1').textContent()).toContain(TITLE);
    expect(await page.locator('dl.facts a code').textContent()).toBe(TAG);
    const notes = page.locator('.release-notes');
    expect(await notes.textContent()).toContain(SCRIPT);
    expect(await notes.textContent()).toContain('<a href="javascript:alert(1)">raw link</a>');
    expect(await notes.locator('img').count()).toBe(0);
    expect(await page.locator('a.asset-name').allTextContents()).toEqual([FILE_NAME, LABEL]);
    expect(await page.locator('table.assets th .muted').textContent()).toBe(ASSET_NAME);
    await checkPage(owner, shown);
    await expectInert(owner);
    const links = [
      `${f.base}/-/releases`,
      `${detail}/edit`,
      `${detail}/delete`,
      ...(await page
        .getByRole('link', { name: /^Delete / })
        .evaluateAll((els: any[]) => els.map((e) => e.href))),
    ];
    for (const url of links) {
      await visit(owner, url);
      expect(await mainText(owner)).toContain(TITLE);
      await expectInert(owner);
    }
    // without a session, the same
    const anon = await watchedPage(f.browser);
    await visit(anon, detail);
    expect(await anon.page.locator('a.asset-name').allTextContents()).toEqual([FILE_NAME, LABEL]);
    await expectInert(anon);
    await anon.context.close();
  });
});
