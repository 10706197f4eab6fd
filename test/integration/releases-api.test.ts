/**
 * Releases and assets with the default (filesystem) blob store: every endpoint, its permission
 * matrix, drafts, and the multipart edge cases. Tags and archives of all three kinds:
 * releases-vcs.test.ts; S3/MinIO: releases-s3.test.ts.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { postMultipart } from '../helpers/multipart.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { pushFirstGitCommit } from '../helpers/vcs.ts';
import { reachFixture } from '../helpers/reach.ts';

const MAX = 1024 * 1024;
let s: TestServer;
let owner: TestUser;
let member: TestUser;
let outsider: TestUser;
let reader: TestUser; // a member whose token lacks releases:write
let org: string;
let repo: string;
let base: string;

beforeAll(async () => {
  s = await startTestServer({ TRIAD_ASSET_MAX_BYTES: String(MAX) });
  owner = await s.newUser();
  member = await s.newUser();
  outsider = await s.newUser();
  reader = await s.newUser(undefined, { scopes: ['repo:read', 'releases:read'] });
  org = await s.newOrg(owner);
  await s.addMember(org, member);
  await s.addMember(org, reader);
  repo = uniq('rel');
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs: 'git' });
  expect(r.status).toBe(201);
  await pushFirstGitCommit(r.body.data.clone_url, owner.token, ['v1.0', 'v1.1', 'v1.2', 'v2.0', 'v3.0']);
  base = `/api/v1/repos/${org}/${repo}/releases`;
});
afterAll(async () => {
  await s.close();
});

async function release(tag: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await owner.client.post(base, { tag_name: tag, name: `Release ${tag}`, ...extra });
  expect(r.status).toBe(201);
  return r.body.data;
}

function upload(releaseId: number, parts: Parameters<typeof postMultipart>[2], token = owner.token) {
  return postMultipart(`${s.url}${base}/${releaseId}/assets`, token, parts);
}

async function blobFiles(): Promise<string[]> {
  const root = path.join(s.dataDir, 'blobs', 'releases');
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

async function incomingFiles(): Promise<string[]> {
  return fs.readdir(path.join(s.dataDir, 'blobs', '.incoming')).catch(() => []);
}

describe('releases', () => {
  test('when a member creates a release for an existing tag, then it reads back by id, by tag and in the list', async () => {
    const r = await member.client.post(base, {
      tag_name: 'v1.0',
      name: 'One',
      body: 'notes',
      prerelease: true,
    });
    expect(r.status).toBe(201);
    const rel = r.body.data;
    expect(r.headers.get('location')).toBe(`${s.url}${base}/${rel.id}`);
    expect(rel).toMatchObject({
      tag_name: 'v1.0',
      name: 'One',
      body: 'notes',
      draft: false,
      prerelease: true,
      author: { id: member.id, username: member.username },
      assets: [],
      tarball_url: `${s.url}/api/v1/repos/${org}/${repo}/archive/v1.0.tar.gz`,
      zipball_url: `${s.url}/api/v1/repos/${org}/${repo}/archive/v1.0.zip`,
    });
    expect(rel.target_commitish).toMatch(/^[0-9a-f]{40}$/);
    expect(rel.published_at).not.toBeNull();
    expect((await s.anon.get(`${base}/${rel.id}`)).body.data).toEqual(rel);
    expect((await s.anon.get(`${base}/tags/v1.0`)).body.data).toEqual(rel);
    expect((await s.anon.get(base)).body.data.map((x: any) => x.id)).toContain(rel.id);
  });

  test('when the tag has a release already, then a second is 409; an unknown tag without target_commitish is 422', async () => {
    await release('v1.1');
    const again = await owner.client.post(base, { tag_name: 'v1.1' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
    const unknown = await owner.client.post(base, { tag_name: 'no-such-tag' });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.code).toBe('unprocessable');
    const badTarget = await owner.client.post(base, { tag_name: 'v9', target_commitish: 'no-such-branch' });
    expect(badTarget.status).toBe(422);
    const badBody = await owner.client.post(base, { tag_name: '' });
    expect(badBody.status).toBe(400);
  });

  test('when callers lack the token, the scope or the membership, then writes are refused and nothing changes', async () => {
    const rel = await release('v1.2');
    const cases: [TestUser | undefined, number][] = [
      [undefined, 401],
      [outsider, 403],
      [reader, 403],
    ];
    for (const [who, status] of cases) {
      const c = who === undefined ? s.anon : who.client;
      expect((await c.post(base, { tag_name: 'v2.0' })).status).toBe(status);
      expect((await c.patch(`${base}/${rel.id}`, { name: 'x' })).status).toBe(status);
      expect((await c.delete(`${base}/${rel.id}`)).status).toBe(status);
      const up = await postMultipart(`${s.url}${base}/${rel.id}/assets`, who?.token, [
        { field: 'attachment', filename: 'a.txt', data: Buffer.from('a') },
      ]);
      expect(up.status).toBe(status);
    }
    const after = await s.anon.get(`${base}/${rel.id}`);
    expect(after.body.data.name).toBe('Release v1.2');
    expect(after.body.data.assets).toEqual([]);
    expect((await s.anon.get(`${base}/tags/v2.0`)).status).toBe(404);
  });

  test('when a release is a draft, then only org members see it, by id, by tag and in lists', async () => {
    const draft = await release('v2.0', { draft: true });
    expect(draft.published_at).toBeNull();
    for (const c of [s.anon, outsider.client]) {
      expect((await c.get(`${base}/${draft.id}`)).status).toBe(404);
      expect((await c.get(`${base}/tags/v2.0`)).status).toBe(404);
      expect((await c.get(`${base}/${draft.id}/assets`)).status).toBe(404);
      expect((await c.get(base)).body.data.map((x: any) => x.id)).not.toContain(draft.id);
    }
    for (const c of [member.client, reader.client, owner.client]) {
      expect((await c.get(`${base}/${draft.id}`)).status).toBe(200);
      expect((await c.get(base)).body.data.map((x: any) => x.id)).toContain(draft.id);
    }
    // publishing sets published_at and shows it to everyone
    const pub = await member.client.patch(`${base}/${draft.id}`, { draft: false });
    expect(pub.status).toBe(200);
    expect(pub.body.data.published_at).not.toBeNull();
    expect((await s.anon.get(`${base}/${draft.id}`)).status).toBe(200);
  });

  test("when a member's token does not reach the repository or cannot read releases, then drafts stay hidden", async () => {
    const { mint, elsewhere } = await reachFixture(s, owner, member, org);
    const all = ['repo:write', 'releases:write', 'pulls:write', 'ci:write'];
    const hidden = [
      ...(await elsewhere(all)),
      await mint({ scopes: ['ci:read'] }),
      await mint({ scopes: ['repo:read', 'pulls:read'] }),
    ];
    const shown = [
      await mint({ scopes: ['releases:read'], level: 'repo', target: `${org}/${repo}` }),
      await mint({ scopes: ['releases:read'], level: 'org', target: org }),
    ];
    const draft = await release('v9.0', { draft: true, target_commitish: 'main' });
    const published = (await s.anon.get(`${base}/tags/v1.0`)).body.data;
    const up = await upload(draft.id, [
      { field: 'attachment', filename: 'draft.bin', data: Buffer.from('draft bytes') },
    ]);
    expect(up.status).toBe(201);
    const asset = up.body.data.id as number;
    for (const c of hidden) {
      // the published releases read as for anyone; the draft does not exist for these tokens
      expect((await c.get(`${base}/${published.id}`)).status).toBe(200);
      for (const p of [
        `${draft.id}`,
        'tags/v9.0',
        `${draft.id}/assets`,
        `${draft.id}/assets/${asset}/download`,
      ]) {
        const r = await c.get(`${base}/${p}`);
        expect(r.status).toBe(404);
        expect(r.body.error.code).toBe('not_found');
      }
      const list = await c.get(`${base}?per_page=100`);
      expect(list.body.data.map((x: any) => x.id)).not.toContain(draft.id);
      expect(list.body.data.map((x: any) => x.id)).toContain(published.id);
    }
    for (const c of shown) {
      expect((await c.get(`${base}/${draft.id}`)).body.data).toMatchObject({ id: draft.id, draft: true });
      expect((await c.get(`${base}/tags/v9.0`)).status).toBe(200);
      expect((await c.get(`${base}/${draft.id}/assets`)).body.data).toHaveLength(1);
      expect((await c.get(`${base}/${draft.id}/assets/${asset}/download`)).text).toBe('draft bytes');
      expect((await c.get(`${base}?per_page=100`)).body.data.map((x: any) => x.id)).toContain(draft.id);
    }
    expect((await owner.client.delete(`${base}/${draft.id}`)).status).toBe(204);
  });

  test('when a release is updated, then only the given fields change', async () => {
    const rel = await release('v3.0', { body: 'keep me' });
    const r = await owner.client.patch(`${base}/${rel.id}`, { name: 'Renamed', prerelease: true });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({
      name: 'Renamed',
      prerelease: true,
      body: 'keep me',
      tag_name: 'v3.0',
    });
    expect((await owner.client.patch(`${base}/999999`, { name: 'x' })).status).toBe(404);
    const clash = await owner.client.patch(`${base}/${rel.id}`, { tag_name: 'v1.0' });
    expect(clash.status).toBe(409);
  });

  test('when releases are listed, then newest come first, paged', async () => {
    const all = await s.anon.get(`${base}?per_page=100`);
    const ids = all.body.data.map((x: any) => x.id);
    expect(ids).toEqual([...ids].sort((a: number, b: number) => b - a));
    const page = await s.anon.get(`${base}?per_page=1&page=2`);
    expect(page.body.data.map((x: any) => x.id)).toEqual([ids[1]]);
    expect(page.body.pagination).toEqual({ page: 2, per_page: 1, total: ids.length });
  });

  test('when the repository is private, then non-members get 404 for every read', async () => {
    const name = uniq('priv');
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: 'git', is_private: true });
    expect(r.status).toBe(201);
    for (const p of ['releases', 'releases/1', 'releases/tags/v1', 'releases/1/assets', 'archive/main.zip']) {
      expect((await s.anon.get(`/api/v1/repos/${org}/${name}/${p}`)).status).toBe(404);
      expect((await outsider.client.get(`/api/v1/repos/${org}/${name}/${p}`)).status).toBe(404);
    }
    expect((await member.client.get(`/api/v1/repos/${org}/${name}/releases`)).status).toBe(200);
  });
});

describe('assets (filesystem store)', () => {
  let rel: any;
  beforeAll(async () => {
    const r = await owner.client.post(base, { tag_name: 'v1.0-assets', target_commitish: 'main' });
    expect(r.status).toBe(201);
    rel = r.body.data;
  });

  test('when a file is uploaded with name and label, then the record, the list and the download agree', async () => {
    const bytes = Buffer.from('binary\u0000bytes '.repeat(5000));
    const up = await upload(rel.id, [
      { field: 'label', value: 'The Linux build' },
      { field: 'attachment', filename: 'ignored.bin', contentType: 'application/x-tar', data: bytes },
      { field: 'name', value: 'triad-linux.tar' },
    ]);
    expect(up.status).toBe(201);
    const asset = up.body.data;
    expect(asset).toMatchObject({
      name: 'triad-linux.tar',
      label: 'The Linux build',
      size: bytes.length,
      content_type: 'application/x-tar',
      digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`,
      download_count: 0,
      uploader: { id: owner.id, username: owner.username },
      browser_download_url: `${s.url}${base}/${rel.id}/assets/${asset.id}/download`,
    });
    const list = await s.anon.get(`${base}/${rel.id}/assets`);
    expect(list.body.data).toEqual([asset]);
    const dl = await fetch(asset.browser_download_url);
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-type')).toBe('application/octet-stream');
    expect(dl.headers.get('content-disposition')).toContain('triad-linux.tar');
    expect(Buffer.from(await dl.arrayBuffer()).equals(bytes)).toBe(true);
    const part = await fetch(asset.browser_download_url, { headers: { range: 'bytes=6-10' } });
    expect(part.status).toBe(206);
    expect(await part.text()).toBe('\u0000byte');
    const again = await s.anon.get(`${base}/${rel.id}/assets`);
    expect(again.body.data[0].download_count).toBe(1);
    expect((await s.anon.get(`${base}/${rel.id}`)).body.data.assets[0].id).toBe(asset.id);
  });

  test('when the name is taken in the release, then 409 and no second object', async () => {
    const one = await upload(rel.id, [{ field: 'attachment', filename: 'dup.txt', data: Buffer.from('1') }]);
    expect(one.status).toBe(201);
    const before = await blobFiles();
    const two = await upload(rel.id, [{ field: 'attachment', filename: 'dup.txt', data: Buffer.from('2') }]);
    expect(two.status).toBe(409);
    expect(await blobFiles()).toEqual(before);
  });

  test('when the multipart body is wrong, then 4xx, no row and no object', async () => {
    const before = await blobFiles();
    const count = (await s.anon.get(`${base}/${rel.id}/assets`)).body.data.length;
    const url = `${s.url}${base}/${rel.id}/assets`;
    const cases: [string, () => Promise<{ status: number; body: any }>, number][] = [
      ['missing file', () => postMultipart(url, owner.token, [{ field: 'name', value: 'x' }]), 400],
      [
        'file in another field',
        () => postMultipart(url, owner.token, [{ field: 'file', filename: 'a', data: Buffer.from('a') }]),
        400,
      ],
      [
        'two files',
        () =>
          postMultipart(url, owner.token, [
            { field: 'attachment', filename: 'a', data: Buffer.from('a') },
            { field: 'attachment', filename: 'b', data: Buffer.from('b') },
          ]),
        400,
      ],
      [
        'truncated body',
        () =>
          postMultipart(
            url,
            owner.token,
            [{ field: 'attachment', filename: 't', data: Buffer.alloc(50_000, 3) }],
            {
              truncate: true,
            },
          ),
        400,
      ],
      [
        'wrong content type',
        () =>
          postMultipart(url, owner.token, [{ field: 'attachment', filename: 'w', data: Buffer.from('w') }], {
            contentType: 'application/json',
          }),
        415,
      ],
      [
        'no name at all',
        () =>
          postMultipart(url, owner.token, [{ field: 'attachment', filename: '', data: Buffer.from('n') }]),
        400,
      ],
      [
        'too large',
        () =>
          postMultipart(url, owner.token, [
            { field: 'attachment', filename: 'big', data: Buffer.alloc(MAX + 1) },
          ]),
        413,
      ],
    ];
    for (const [what, p, status] of cases) {
      const r = await p();
      expect([what, r.status]).toEqual([what, status]);
      expect(r.body.error.code).toEqual(expect.any(String));
    }
    expect((await s.anon.get(`${base}/${rel.id}/assets`)).body.data.length).toBe(count);
    expect(await blobFiles()).toEqual(before);
  });

  test('when the declared length passes the cap, then 413 before anything is stored', async () => {
    const before = { blobs: await blobFiles(), incoming: await incomingFiles() };
    const count = (await s.anon.get(`${base}/${rel.id}/assets`)).body.data.length;
    // Content-Length far over the cap, 10 bytes sent, the request left open: the server answers
    // from the header alone, so the answer arrives while the client could still be sending
    const url = new URL(`${s.url}${base}/${rel.id}/assets`);
    const answer = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${owner.token}`,
          'content-type': 'multipart/form-data; boundary=x',
          'content-length': String(MAX * 4),
        },
      });
      req.on('error', reject);
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        });
        res.on('error', reject);
      });
      req.write(Buffer.alloc(10));
    });
    expect(answer.status).toBe(413);
    expect(answer.body.error.code).toBe('payload_too_large');
    expect((await s.anon.get(`${base}/${rel.id}/assets`)).body.data.length).toBe(count);
    expect({ blobs: await blobFiles(), incoming: await incomingFiles() }).toEqual(before);
  });

  test('when a file is empty, then it is an asset of size 0', async () => {
    const r = await upload(rel.id, [{ field: 'attachment', filename: 'empty.txt', data: Buffer.alloc(0) }]);
    expect(r.status).toBe(201);
    expect(r.body.data.size).toBe(0);
    expect(r.body.data.digest).toBe(`sha256:${createHash('sha256').digest('hex')}`);
  });

  test('when an asset is deleted, then its row and object go', async () => {
    const r = await upload(rel.id, [{ field: 'attachment', filename: 'gone.txt', data: Buffer.from('bye') }]);
    const before = await blobFiles();
    expect((await reader.client.delete(`${base}/${rel.id}/assets/${r.body.data.id}`)).status).toBe(403);
    const del = await member.client.delete(`${base}/${rel.id}/assets/${r.body.data.id}`);
    expect(del.status).toBe(204);
    expect((await s.anon.get(`${base}/${rel.id}/assets/${r.body.data.id}/download`)).status).toBe(404);
    expect((await blobFiles()).length).toBe(before.length - 1);
  });

  test('when a release is deleted, then its assets and their objects go with it', async () => {
    const r = await owner.client.post(base, { tag_name: 'to-delete', target_commitish: 'main' });
    const id = r.body.data.id;
    for (const n of ['a', 'b']) {
      expect((await upload(id, [{ field: 'attachment', filename: n, data: Buffer.from(n) }])).status).toBe(
        201,
      );
    }
    const before = (await blobFiles()).length;
    expect((await owner.client.delete(`${base}/${id}`)).status).toBe(204);
    expect((await s.anon.get(`${base}/${id}`)).status).toBe(404);
    expect((await blobFiles()).length).toBe(before - 2);
  });

  test('when an object has no row (a crash between store and insert), then the sweeper removes it', async () => {
    const blobs = path.join(s.dataDir, 'blobs');
    const orphan = path.join(blobs, 'releases', '999', '999', 'orphan');
    await fs.mkdir(path.dirname(orphan), { recursive: true });
    await fs.writeFile(orphan, 'left behind');
    // an upload refused mid-stream (the 413 above) removes its temporary file once its put has
    // unwound, which may come just after the answer: none is left for the sweeper to count
    for (let i = 0; i < 100 && (await incomingFiles()).length > 0; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(await incomingFiles()).toEqual([]);
    const kept = await blobFiles();
    expect(await s.running.services.releases.assets.sweep(60_000)).toBe(0); // too young yet
    expect(await s.running.services.releases.assets.sweep(0)).toBe(1);
    expect(await blobFiles()).toEqual(kept.filter((f) => f !== orphan));
  });
});
