/**
 * Releases under bad input and races: multipart fields the columns cannot hold, an upload racing
 * the release's deletion, tag creation in a busy repository, and the orphan sweeper meeting an
 * upload whose row is not written yet. Filesystem blob store; the sweeper is run directly.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { postMultipart } from '../helpers/multipart.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { pushFirstGitCommit } from '../helpers/vcs.ts';
import { waitUntil } from '../helpers/wait.ts';

const PUSH_LOCK = 0x70757368; // src/repos/repository.ts
let s: TestServer;
let owner: TestUser;
let base: string;
let repoId: number;

beforeAll(async () => {
  s = await startTestServer({});
  owner = await s.newUser();
  const org = await s.newOrg(owner);
  const repo = uniq('relr');
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs: 'git' });
  expect(r.status).toBe(201);
  repoId = r.body.data.id;
  await pushFirstGitCommit(r.body.data.clone_url, owner.token, ['v1', 'v2', 'v3', 'v4']);
  base = `/api/v1/repos/${org}/${repo}/releases`;
});
afterAll(async () => {
  await s.close();
});

async function release(tag: string): Promise<any> {
  const r = await owner.client.post(base, { tag_name: tag });
  expect(r.status).toBe(201);
  return r.body.data;
}

async function files(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}
const blobFiles = () => files(path.join(s.dataDir, 'blobs', 'releases'));
const incomingFiles = () => files(path.join(s.dataDir, 'blobs', '.incoming'));

/**
 * An upload whose body stops right after the file part (the next part's boundary is sent, so
 * the file is complete and stored) until `finish()` sends a `label` field and the end.
 */
function stalledUpload(
  url: string,
  data: Buffer,
): { finish: () => void; answer: Promise<{ status: number; body: any }> } {
  const b = 'stall-boundary-91';
  const head = Buffer.from(
    `--${b}\r\nContent-Disposition: form-data; name="attachment"; filename="slow.bin"\r\n` +
      `Content-Type: application/octet-stream\r\n\r\n`,
  );
  const mid = Buffer.from(`\r\n--${b}\r\n`);
  const tail = Buffer.from(`Content-Disposition: form-data; name="label"\r\n\r\nlate\r\n--${b}--\r\n`);
  const req = http.request(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${owner.token}`,
      'content-type': `multipart/form-data; boundary=${b}`,
      'content-length': String(head.length + data.length + mid.length + tail.length),
    },
  });
  const answer = new Promise<{ status: number; body: any }>((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
  });
  req.write(Buffer.concat([head, data, mid]));
  return { finish: () => req.end(tail), answer };
}

describe('releases: bad multipart fields', () => {
  test('when a field does not fit its column, then 400 with the envelope and nothing is stored', async () => {
    const rel = await release('v1');
    const url = `${s.url}${base}/${rel.id}/assets`;
    const file = (contentType?: string) => ({
      field: 'attachment',
      filename: 'a.bin',
      contentType,
      data: Buffer.from('a'),
    });
    const before = await blobFiles();
    const cases: [string, Parameters<typeof postMultipart>[2]][] = [
      ['content type over 255 characters', [file('application/' + 'x'.repeat(300))]],
      ['NUL in the label', [{ field: 'label', value: 'bad\u0000label' }, file()]],
      ['control character in the label', [file(), { field: 'label', value: 'bell\u0007' }]],
      ['label over 1000 characters', [{ field: 'label', value: 'l'.repeat(1001) }, file()]],
      ['NUL in the name field', [{ field: 'name', value: 'a\u0000.bin' }, file()]],
      ['name over 255 characters', [{ field: 'name', value: 'n'.repeat(256) }, file()]],
    ];
    for (const [what, parts] of cases) {
      const r = await postMultipart(url, owner.token, parts);
      expect([what, r.status, r.body.error?.code]).toEqual([what, 400, expect.any(String)]);
      expect(r.body.error.code).not.toBe('internal');
    }
    expect((await s.anon.get(`${base}/${rel.id}/assets`)).body.data).toEqual([]);
    expect(await blobFiles()).toEqual(before);
    expect(await incomingFiles()).toEqual([]);

    // what the checks let through: line breaks in a label, a 255-character content type
    const type = 'application/' + 'y'.repeat(243);
    const good = await postMultipart(url, owner.token, [
      { field: 'label', value: 'two\nlines\tand a tab' },
      file(type),
    ]);
    expect(good.status).toBe(201);
    expect(good.body.data).toMatchObject({ label: 'two\nlines\tand a tab', content_type: type });
  });
});

describe('releases: an upload racing the release deletion', () => {
  test('when the release is deleted while the body streams, then 404 and its object is gone', async () => {
    const rel = await release('v2');
    let release2: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release2 = r));
    const stream = Readable.from(
      (async function* () {
        yield Buffer.alloc(1000, 1);
        await gate;
        yield Buffer.alloc(1000, 2);
      })(),
    );
    const up = postMultipart(`${s.url}${base}/${rel.id}/assets`, owner.token, [
      { field: 'attachment', filename: 'race.bin', data: { size: 2000, stream } },
    ]);
    // the release was checked and the object's put has started
    await waitUntil('the put to start', async () => (await incomingFiles()).length > 0);
    expect((await owner.client.delete(`${base}/${rel.id}`)).status).toBe(204);
    release2();
    const r = await up;
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('not_found');
    const prefix = path.join(s.dataDir, 'blobs', 'releases', String(repoId), String(rel.id));
    expect(await files(prefix)).toEqual([]);
    expect(await incomingFiles()).toEqual([]);
  });
});

describe('releases: tag creation in a busy repository', () => {
  test('when the repository stays busy, then 503 service_unavailable and no tag', async () => {
    const records = s.running.services.releases.records;
    const saved = { lock: records.lockWaitMs, queue: records.queueWaitMs };
    const c = new pg.Client({ connectionString: s.dbUrl });
    await c.connect();
    try {
      // another replica holds the push lock
      await c.query('begin');
      await c.query('select pg_advisory_xact_lock($1, $2)', [PUSH_LOCK, repoId]);
      records.lockWaitMs = 120_000;
      records.queueWaitMs = 300;
      const first = owner.client.post(base, { tag_name: 'busy-a', target_commitish: 'main' });
      await waitUntil('the first creation to wait for the lock', async () => {
        const w = await c.query(`select 1 from pg_locks where locktype = 'advisory' and not granted`);
        return (w.rowCount ?? 0) > 0;
      });
      // the second waits in this process's queue behind the first, and its wait runs out
      const queued = await owner.client.post(base, { tag_name: 'busy-b', target_commitish: 'main' });
      expect(queued.status).toBe(503);
      expect(queued.body.error.code).toBe('service_unavailable');
      await c.query('commit');
      expect((await first).status).toBe(201);

      // the push lock itself is not granted in time
      await c.query('begin');
      await c.query('select pg_advisory_xact_lock($1, $2)', [PUSH_LOCK, repoId]);
      records.lockWaitMs = 1000;
      records.queueWaitMs = 120_000;
      const locked = await owner.client.post(base, { tag_name: 'busy-c', target_commitish: 'main' });
      expect(locked.status).toBe(503);
      expect(locked.body.error.code).toBe('service_unavailable');
      await c.query('commit');
    } finally {
      records.lockWaitMs = saved.lock;
      records.queueWaitMs = saved.queue;
      await c.end();
    }
    // no tag was made for the refused ones: a release of it needs target_commitish (422)
    for (const tag of ['busy-b', 'busy-c']) {
      const r = await owner.client.post(base, { tag_name: tag });
      expect([tag, r.status]).toEqual([tag, 422]);
    }
    expect((await owner.client.get(`${base}/tags/busy-a`)).status).toBe(200);
  });
});

describe('releases: the sweeper and an upload whose row is not written yet', () => {
  test('when the sweeper removes the object before the row is written, then 503 and no row', async () => {
    const rel = await release('v3');
    const before = await blobFiles();
    const up = stalledUpload(`${s.url}${base}/${rel.id}/assets`, Buffer.from('swept'));
    await waitUntil('the object to be stored', async () => (await blobFiles()).length > before.length);
    // a sweep that counts every object without a row as an orphan
    expect(await s.running.services.releases.assets.sweep(0, 60 * 60_000)).toBe(1);
    up.finish();
    const r = await up.answer;
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('storage_unavailable');
    expect((await s.anon.get(`${base}/${rel.id}/assets`)).body.data).toEqual([]);
    expect(await blobFiles()).toEqual(before);
  });

  test('when the body stalls after the file for more than half the sweep grace, then 400 and nothing stays', async () => {
    const rel = await release('v4');
    const assets = s.running.services.releases.assets;
    const saved = assets.sweepGraceMs;
    const before = await blobFiles();
    assets.sweepGraceMs = 1000;
    try {
      const up = stalledUpload(`${s.url}${base}/${rel.id}/assets`, Buffer.from('slow'));
      await waitUntil('the object to be stored', async () => (await blobFiles()).length > before.length);
      await new Promise((r) => setTimeout(r, 2000)); // well past half the grace
      up.finish();
      const r = await up.answer;
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('bad_request');
    } finally {
      assets.sweepGraceMs = saved;
    }
    expect((await s.anon.get(`${base}/${rel.id}/assets`)).body.data).toEqual([]);
    expect(await blobFiles()).toEqual(before);
  });
});
