import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { addCommit, LOGO, MAIN_C1, populate, type Fixture } from './contents-fixture.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/** A 60 MB file of random bytes (nothing compresses it). */
const BIG = randomBytes(60 * 1024 * 1024);
const BIG_SHA = createHash('sha256').update(BIG).digest('hex');

let s: TestServer;
let owner: TestUser;
let org: string;
beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  org = await s.newOrg(owner);
});
afterAll(async () => {
  await s.close();
});

async function newRepo(vcs: VcsKind): Promise<{ base: string; store: string }> {
  const name = uniq(`raw${vcs}`);
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs });
  expect(r.status).toBe(201);
  return {
    base: `/api/v1/repos/${org}/${name}`,
    store: s.running.services.repos.path({ id: r.body.data.id, vcs }),
  };
}

const get = (p: string) => fetch(`${s.url}${p}`, { signal: AbortSignal.timeout(120_000) });

describe.each(['git', 'hg', 'fossil'] as const)('%s: raw file downloads', (vcs) => {
  let base: string;
  let fx: Fixture;
  let big: string;
  let store: string;
  beforeAll(async () => {
    const repo = await newRepo(vcs);
    base = repo.base;
    store = repo.store;
    fx = await populate(vcs, repo.store);
    big = await addCommit(vcs, repo.store, { 'big/blob.bin': BIG });
  }, 180_000);

  test('when a text file is asked for, then its bytes come as text/plain with their length, at tip or at a revision', async () => {
    const r = await get(`${base}/raw/README.md`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(r.headers.get('content-length')).toBe('12');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await r.text()).toBe('hello\nworld\n');
    const old = await get(`${base}/raw/src/main.c?rev=${fx.c1}`);
    expect(old.status).toBe(200);
    expect(await old.text()).toBe(MAIN_C1);
  });

  test('when a binary file is asked for, then its exact bytes come as application/octet-stream', async () => {
    const r = await get(`${base}/raw/logo.png`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    expect(r.headers.get('content-length')).toBe(String(LOGO.length));
    expect(Buffer.from(await r.arrayBuffer())).toEqual(LOGO);
  });

  test('when a 60 MB file is downloaded, then every byte arrives, and other reads of the repository answer meanwhile', async () => {
    const r = await get(`${base}/raw/big/blob.bin?rev=${big}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    expect(r.headers.get('content-length')).toBe(String(BIG.length));
    const reader = r.body!.getReader();
    const hash = createHash('sha256');
    let size = 0;
    const first = await reader.read();
    hash.update(first.value);
    size += first.value!.length;
    // the download is under way: the repository's other reads are not behind it
    const tree = await get(`${base}/tree?rev=${big}`);
    expect(tree.status).toBe(200);
    expect(((await tree.json()) as { data: { name: string }[] }).data.map((e) => e.name)).toContain('big');
    for (let c = await reader.read(); !c.done; c = await reader.read()) {
      hash.update(c.value);
      size += c.value.length;
    }
    expect(size).toBe(BIG.length);
    expect(hash.digest('hex')).toBe(BIG_SHA);
  }, 120_000);

  test('when the path, the revision or the file does not exist, or names a directory, then 404; a path escaping the repository is 400', async () => {
    for (const p of [`${base}/raw/nope.txt`, `${base}/raw/src`, `${base}/raw/README.md?rev=no-such-rev`]) {
      const r = await get(p);
      expect({ p, status: r.status }).toEqual({ p, status: 404 });
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('not_found');
    }
    const up = await get(`${base}/raw/src/..%2F..%2Fetc/passwd`);
    expect(up.status).toBe(400);
    expect(((await up.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
  });

  test('when a file name starts with a dash (`-x.txt`, `--args`), then its bytes come as for any other name', async () => {
    const id = await addCommit(vcs, store, { '-x.txt': 'dash\n', '--args': 'not an option\n' });
    for (const [p, body] of [
      ['-x.txt', 'dash\n'],
      ['--args', 'not an option\n'],
      [`-x.txt?rev=${id}`, 'dash\n'],
    ] as const) {
      const r = await get(`${base}/raw/${p}`);
      expect({ p, status: r.status }).toEqual({ p, status: 200 });
      expect(await r.text()).toBe(body);
    }
  }, 120_000);

  test('when the repository was just created, then 404 as the blob read answers ("repository is empty"; Fossil: its initial check-in has no files)', async () => {
    const empty = await newRepo(vcs);
    const r = await get(`${empty.base}/raw/README.md`);
    expect(r.status).toBe(404);
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error).toEqual({
      code: 'not_found',
      message: vcs === 'fossil' ? 'path not found' : 'repository is empty',
    });
    const blob = await get(`${empty.base}/blob/README.md`);
    expect(await blob.json()).toEqual(body);
  });
});
