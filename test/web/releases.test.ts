/**
 * Releases in a real browser, with assets on a real MinIO: a release made with the page's form
 * (its new tag created), a 50 MB file uploaded with the progress bar moving to 100 % and
 * downloaded byte for byte through the session route, an upload cancelled half-way (nothing kept),
 * the plain upload form without script (and its refusal shown again), a release changed, a file
 * and a release deleted through their confirmation pages.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { CDPSession } from 'playwright-core';
import { checkPage, CSP, screenshot, visit, type Watched } from '../helpers/browser.ts';
import { digest, pattern } from '../helpers/bytes.ts';
import { tempDir } from '../helpers/vcs.ts';
import { signedIn } from './code-fixture.ts';
import { submit } from './settings-helpers.ts';
import { bucketSettles, closeFixture, mainText, releasesFixture, type Fixture } from './releases-fixture.ts';

const MiB = 1024 * 1024;
const BIG = 50 * MiB;

let f: Fixture;
let w: Watched;
let big: string;
let bigSha: string;
let cdp: CDPSession | undefined;

beforeAll(async () => {
  f = await releasesFixture();
  w = await signedIn(f.browser, f.ts, f.W.user);
  big = path.join(await tempDir('triad-web-release-'), 'big.bin');
  await pipeline(pattern(BIG, 3), createWriteStream(big));
  bigSha = (await digest(createReadStream(big))).sha;
}, 120_000);
afterAll(async () => {
  await w?.context.close();
  await closeFixture(f);
});

/** Records every value the upload's progress bar shows (its text changes with each). */
async function recordProgress(): Promise<void> {
  await w.page.evaluate(() => {
    const g = globalThis as any;
    const bar = g.document.querySelector('[data-upload-progress] progress');
    const text = g.document.querySelector('[data-upload-text]');
    g.__progress = [];
    new g.MutationObserver(() => g.__progress.push(bar.value)).observe(text, {
      childList: true,
      characterData: true,
      subtree: true,
    });
  });
}

/** Limits the browser's upload speed (bytes a second; -1: no limit), so the progress is seen moving. */
async function throttleUpload(bytesPerSecond: number): Promise<void> {
  // (one DevTools session for the page: its emulation lasts while it is attached)
  if (cdp === undefined) {
    cdp = await w.context.newCDPSession(w.page);
    await cdp.send('Network.enable');
  }
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: bytesPerSecond,
  });
}

async function uploadStatus(text: string): Promise<void> {
  await w.page
    .locator('[data-upload-status]', { hasText: text })
    .waitFor({ timeout: 30_000 })
    .catch(async (e: unknown) => {
      const form = await w.page.locator('form[data-upload]').innerHTML();
      throw new Error(`${String(e)}\n${form}`);
    });
}

/** Creates a release with the new-release form (the list page is open); answers its id. */
async function createRelease(tag: string, title: string, notes: string, target = 'main'): Promise<number> {
  const page = w.page;
  await Promise.all([
    page.waitForURL(/\/releases\/new$/),
    page.getByRole('link', { name: 'New release' }).click(),
  ]);
  await page.getByLabel('Tag', { exact: true }).fill(tag);
  await page.getByLabel('Target of a new tag').selectOption(target);
  await page.getByLabel('Title').fill(title);
  await page.getByLabel('Release notes', { exact: true }).fill(notes);
  const res = await submit(w, 'Create release');
  expect(res.status()).toBe(303);
  return Number(/\/releases\/(\d+)\?created=1$/.exec(res.headers().location ?? '')?.[1]);
}

describe('a release made in the pages', () => {
  test('when a release is created and a 50 MB file uploaded with progress, then it downloads byte for byte', async () => {
    const page = w.page;
    const list = await visit(w, `${f.base}/-/releases`);
    expect(await mainText(w)).toContain('There are no releases yet.');
    expect(await page.getByRole('link', { name: 'Releases' }).getAttribute('aria-current')).toBe('page');
    await checkPage(w, list);
    await Promise.all([
      page.waitForURL(/\/releases\/new$/),
      page.getByRole('link', { name: 'New release' }).click(),
    ]);
    await checkPage(w, (await page.reload())!);
    await page.goBack();
    const id = await createRelease('v2.0', 'Second edition', '## Changes\n\n- **faster** uploads\n');
    expect(await page.locator('[role="status"].flash').textContent()).toBe('The release was created.');
    expect(await page.locator('h1').textContent()).toMatch(/^Second edition\s*Latest$/);
    expect(await page.locator('.release-notes strong').textContent()).toBe('faster');
    expect(await page.locator('dl.facts a', { hasText: 'v2.0' }).getAttribute('href')).toBe(
      `/${f.W.org}/${f.P.repo.name}/-/tree/v2.0`,
    );
    const owner = f.W.owner.client;
    const tags = (await owner.get(`${f.api}/tags`)).body.data.map((t: { name: string }) => t.name);
    expect(tags).toEqual(expect.arrayContaining(['v1.0', 'v2.0']));
    expect((await owner.get(`${f.api}/releases/latest`)).body.data.id).toBe(id);
    await checkPage(w, (await page.reload())!);

    // the 50 MB file, with the progress bar moving to its end (at most 25 MB/s: 2 s at least)
    await throttleUpload(25 * MiB);
    await recordProgress();
    await page.getByLabel('File', { exact: true }).setInputFiles(big);
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    await uploadStatus('Uploaded big.bin.');
    await throttleUpload(-1);
    const seen: number[] = await page.evaluate(() => (globalThis as any).__progress);
    expect(seen.some((v) => v > 0 && v < 100)).toBe(true);
    expect(seen.at(-1)).toBe(100);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
    expect(await page.locator('[data-upload-progress] progress').evaluate((el: any) => el.value)).toBe(100);
    expect(await page.locator('[data-upload-text]').textContent()).toMatch(/^100% · /);
    const row = page.locator('table.assets tbody tr');
    expect(await row.count()).toBe(1);
    expect(await row.locator('.digest').textContent()).toBe(`sha256:${bigSha}`);
    expect(await row.locator('td.size').textContent()).toBe('50 MiB');
    await bucketSettles(f, 1);

    // downloaded through the session route, byte for byte, and counted
    const [dl] = await Promise.all([
      page.waitForEvent('download'),
      row.getByRole('link', { name: 'big.bin', exact: true }).click(),
    ]);
    expect(dl.url()).toMatch(new RegExp(`/-/releases/${id}/assets/\\d+$`));
    expect(await digest(createReadStream(await dl.path()))).toEqual({ sha: bigSha, size: BIG });
    await page.reload();
    expect(await page.locator('table.assets td.downloads').textContent()).toBe('1');
    await page.evaluate(() => (globalThis as any).scrollTo(0, 0));
    await screenshot(w, 'release');
  });

  test('when an upload is cancelled half-way, then nothing of it is kept', async () => {
    const page = w.page;
    await visit(w, `${f.base}/-/releases`);
    const id = await createRelease('v2.1', 'Cancelled upload', '');
    // a file over the cap the form names is refused before anything is sent
    await page.locator('#f-attachment').evaluate((el: any) => el.setAttribute('data-max-bytes', '1000'));
    await page.getByLabel('File', { exact: true }).setInputFiles(big);
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    expect(await page.getByRole('alert').textContent()).toBe(
      'big.bin is larger than the 1000 bytes a file may have; nothing was sent.',
    );
    await page
      .locator('#f-attachment')
      .evaluate((el: any) => el.setAttribute('data-max-bytes', String(2 ** 31)));
    await throttleUpload(8 * MiB);
    await recordProgress();
    await page.getByLabel('File', { exact: true }).setInputFiles(big);
    await page.getByRole('button', { name: 'Upload', exact: true }).click();
    await page.waitForFunction(() => (globalThis as any).__progress.some((v: number) => v >= 10));
    await page.getByRole('button', { name: 'Cancel upload' }).click();
    await uploadStatus('The upload was cancelled; nothing was kept.');
    await throttleUpload(-1);
    expect(await page.getByRole('button', { name: 'Upload', exact: true }).isEnabled()).toBe(true);
    expect(await page.locator('#assets-list').textContent()).toContain('No files were uploaded');
    const assets = await f.W.owner.client.get(`${f.api}/releases/${id}/assets`);
    expect(assets.body.data).toEqual([]);
    // only the first test's file stays in the bucket
    await bucketSettles(f, 1);
  });

  test('without script, the list and a release read, the plain form uploads a file, and a refused upload is shown again', async () => {
    const off = await signedIn(f.browser, f.ts, f.W.user, false);
    const page = off.page;
    const list = await visit(off, `${f.base}/-/releases`);
    expect(await page.locator('.release-name').allTextContents()).toEqual([
      'Cancelled upload',
      'Second edition',
    ]);
    const latest = page.locator('.release-list li', { has: page.locator('.badge.latest') });
    expect(await latest.locator('.release-name').textContent()).toBe('Cancelled upload');
    // (axe needs script: the pages are checked with it in the other tests; here the headers)
    expect(list.headers()['content-security-policy']).toBe(CSP);
    await Promise.all([
      page.waitForURL(/\/releases\/\d+$/),
      page.getByRole('link', { name: 'Second edition' }).click(),
    ]);
    expect(await page.locator('[data-upload-progress]').isVisible()).toBe(false);
    expect(await page.getByRole('button', { name: 'Cancel upload' }).isVisible()).toBe(false);

    const notes = {
      name: 'notes.txt',
      mimeType: 'text/plain',
      buffer: Buffer.from('the notes, as a file\n'),
    };
    await page.getByLabel('File', { exact: true }).setInputFiles(notes);
    await page.getByLabel('Label (optional)').fill('Notes in a file');
    const up = await submit(off, 'Upload');
    expect(up.status()).toBe(303);
    expect(up.headers().location).toMatch(/\/releases\/\d+\?uploaded=1#assets$/);
    expect(await page.locator('.flash.ok').textContent()).toBe('The file was uploaded.');
    const row = page.locator('table.assets tbody tr', { hasText: 'Notes in a file' });
    expect(await row.locator('th').textContent()).toBe('Notes in a filenotes.txt');
    expect(await row.locator('td.size').textContent()).toBe('21 bytes');

    // the same name again: refused with the reason, the page shown again, nothing stored
    await page.getByLabel('File', { exact: true }).setInputFiles(notes);
    const again = await submit(off, 'Upload');
    expect(again.status()).toBe(409);
    expect(await page.getByRole('alert').first().textContent()).toContain(
      'has an asset named notes.txt already',
    );
    expect(await page.locator('table.assets tbody tr').count()).toBe(2);
    expect(off.incidents).toEqual({ violations: [], dialogs: [], errors: [] });
    await bucketSettles(f, 2);
    await off.context.close();
  });

  test('when a release is changed, a file and then the release deleted through their confirmation pages, then the API follows and the tag stays', async () => {
    const page = w.page;
    await visit(w, `${f.base}/-/releases`);
    await Promise.all([
      page.waitForURL(/\/releases\/\d+$/),
      page.getByRole('link', { name: 'Second edition' }).click(),
    ]);
    const id = Number(/\/releases\/(\d+)$/.exec(page.url())?.[1]);
    await Promise.all([
      page.waitForURL(/\/edit$/),
      page.getByRole('link', { name: 'Edit', exact: true }).click(),
    ]);
    await checkPage(w, (await page.reload())!);
    expect(await page.getByLabel('Tag', { exact: true }).inputValue()).toBe('v2.0');
    expect(await page.getByLabel('Title').inputValue()).toBe('Second edition');

    // a tag another release has: refused, what was typed shown again
    await page.getByLabel('Tag', { exact: true }).fill('v2.1');
    await page.getByLabel('Title').fill('Second edition, revised');
    const refused = await submit(w, 'Save release');
    expect(refused.status()).toBe(409);
    expect(await page.getByRole('alert').textContent()).toContain('a release for tag v2.1 exists already');
    expect(await page.getByLabel('Title').inputValue()).toBe('Second edition, revised');
    await page.getByLabel('Tag', { exact: true }).fill('v2.0');
    await page.getByLabel(/^Pre-release/).check();
    expect((await submit(w, 'Save release')).status()).toBe(303);
    expect(await page.locator('.flash.ok').textContent()).toBe('The release was saved.');
    expect(await page.locator('h1').textContent()).toMatch(/^Second edition, revised\s*Pre-release$/);
    const api = f.W.owner.client;
    expect((await api.get(`${f.api}/releases/${id}`)).body.data).toMatchObject({
      name: 'Second edition, revised',
      tag_name: 'v2.0',
      prerelease: true,
      body: '## Changes\n\n- **faster** uploads\n',
    });

    // a file: its confirmation page, Cancel, then Delete file
    await Promise.all([
      page.waitForURL(/\/delete$/),
      page.getByRole('link', { name: 'Delete notes.txt' }).click(),
    ]);
    await checkPage(w, (await page.reload())!);
    expect(await page.locator('h1').textContent()).toBe('Delete the file notes.txt?');
    await Promise.all([
      page.waitForURL(/\/releases\/\d+$/),
      page.getByRole('link', { name: 'Cancel' }).click(),
    ]);
    expect(await page.locator('table.assets tbody tr').count()).toBe(2);
    await Promise.all([
      page.waitForURL(/\/delete$/),
      page.getByRole('link', { name: 'Delete notes.txt' }).click(),
    ]);
    expect((await submit(w, 'Delete file')).status()).toBe(303);
    expect(await page.locator('.flash.ok').textContent()).toBe('The file was deleted.');
    expect(await page.locator('table.assets tbody tr').count()).toBe(1);

    // the release: its confirmation page names what goes and what stays
    await Promise.all([
      page.waitForURL(/\/delete$/),
      page.getByRole('link', { name: 'Delete', exact: true }).click(),
    ]);
    await checkPage(w, (await page.reload())!);
    expect(await mainText(w)).toContain(
      'The release and its 1 file are deleted for good. The tag v2.0 stays',
    );
    const gone = await submit(w, 'Delete release');
    expect({ status: gone.status(), to: gone.headers().location }).toEqual({
      status: 303,
      to: `/${f.W.org}/${f.P.repo.name}/-/releases?deleted=1`,
    });
    expect(await page.locator('.flash.ok').textContent()).toBe('The release was deleted.');
    expect(await page.locator('.release-name').allTextContents()).toEqual(['Cancelled upload']);
    expect((await api.get(`${f.api}/releases/${id}`)).status).toBe(404);
    const tags = (await api.get(`${f.api}/tags`)).body.data.map((t: { name: string }) => t.name);
    expect(tags).toContain('v2.0');
    await bucketSettles(f, 0);
    await visit(w, `${f.base}/-/releases/${id}`, 404);
  });
});
