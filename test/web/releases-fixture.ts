/**
 * What the releases pages' browser tests share: a server whose assets go to a real MinIO, an
 * organization with a pushed Git repository (tag `v1.0`, branches `main` and `feature/x`), and
 * reads of the bucket and of the API to compare the pages with.
 */
import { expect } from '@jest/globals';
import type { Browser } from 'playwright-core';
import { startMinio, type MinioServer } from '../helpers/minio.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { openBrowser, type Watched } from '../helpers/browser.ts';
import { pushedRepo, world, type Pushed, type World } from './code-fixture.ts';

export const BUCKET = 'triad-assets';

export type Fixture = {
  browser: Browser;
  minio: MinioServer;
  ts: TestServer;
  W: World;
  P: Pushed;
  /** `http://…/:org/:repo` */
  base: string;
  /** `/api/v1/repos/:org/:repo` */
  api: string;
};

export async function releasesFixture(): Promise<Fixture> {
  const [browser, minio] = await Promise.all([openBrowser(), startMinio()]);
  const ts = await startTestServer({
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: BUCKET,
    TRIAD_S3_REGION: minio.region,
  });
  const W = await world(ts);
  const P = await pushedRepo(W, 'git');
  return {
    browser,
    minio,
    ts,
    W,
    P,
    base: `${ts.url}/${W.org}/${P.repo.name}`,
    api: `/api/v1/repos/${W.org}/${P.repo.name}`,
  };
}

export async function closeFixture(f: Fixture | undefined): Promise<void> {
  await f?.browser.close();
  await f?.ts.close();
  await f?.minio.stop();
}

/** The objects and the unfinished multipart uploads under `releases/` in the bucket. */
export async function bucket(f: Fixture): Promise<{ objects: string[]; incomplete: number }> {
  const c = f.minio.client();
  const objects: string[] = [];
  for await (const o of c.listObjectsV2(BUCKET, 'releases/', true))
    objects.push((o as { name: string }).name);
  const incomplete: unknown[] = [];
  for await (const u of c.listIncompleteUploads(BUCKET, 'releases/', true)) incomplete.push(u);
  return { objects, incomplete: incomplete.length };
}

/** Waits (up to 15 s) until the bucket holds exactly `n` objects and no unfinished upload. */
export async function bucketSettles(f: Fixture, n: number): Promise<void> {
  let last = await bucket(f);
  for (let i = 0; i < 150 && (last.objects.length !== n || last.incomplete !== 0); i++) {
    await new Promise((r) => setTimeout(r, 100));
    last = await bucket(f);
  }
  expect({ objects: last.objects.length, incomplete: last.incomplete }).toEqual({
    objects: n,
    incomplete: 0,
  });
}

/** The session's form token, from the account menu's sign-out form. */
export async function formToken(w: Watched): Promise<string> {
  return w.page.locator('input[name="_csrf"]').first().inputValue();
}

/** The text of `main`. */
export async function mainText(w: Watched): Promise<string> {
  return (await w.page.locator('main').textContent()) ?? '';
}
