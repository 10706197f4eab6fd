/**
 * Releases with the S3 blob store on a real MinIO server (loopback): the acceptance scenario, a
 * 200 MB asset byte-exact, presigned redirects, MinIO stopped mid-test, and step logs shared by
 * two replicas through the bucket.
 */
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config.ts';
import { startServer, type Running } from '../../src/server.ts';
import { digest, pattern } from '../helpers/bytes.ts';
import { TWO_STEPS, commitFiles, gitRepo, newAgent } from '../helpers/ci.ts';
import { startMinio, type MinioServer } from '../helpers/minio.ts';
import { postMultipart } from '../helpers/multipart.ts';
import { Client, startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { ok, withCreds } from '../helpers/vcs.ts';

const MiB = 1024 * 1024;
const BUCKET = 'triad-assets';
let minio: MinioServer;
let s: TestServer;
let replica: Running; // a second server on the same database and bucket, redirecting downloads
let owner: TestUser;
let org: string;
let repoName: string;
let base: string;

function s3Env(): Record<string, string> {
  return {
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: BUCKET,
    TRIAD_S3_REGION: minio.region,
  };
}

beforeAll(async () => {
  minio = await startMinio();
  s = await startTestServer(s3Env());
  replica = await startServer(
    loadConfig({
      ...s3Env(),
      DATABASE_URL: s.dbUrl,
      PORT: '0',
      HOST: '127.0.0.1',
      TRIAD_DATA_DIR: `${s.dataDir}/replica`,
      TRIAD_REPO_DIR: `${s.dataDir}/repos`,
      TRIAD_EMBEDDED_AGENT: 'off',
      LOG_LEVEL: 'silent',
      TRIAD_LOG_REQUESTS: 'false',
      TRIAD_S3_REDIRECT_DOWNLOADS: 'true',
    }),
    { migrate: false },
  );
  owner = await s.newUser();
  org = await s.newOrg(owner);
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { 'README.md': '# s3\n' }, 'first');
  await ok('git', ['tag', 'v1.0'], repo.work);
  await ok('git', ['tag', 'v2.0'], repo.work);
  await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main', '--tags'], repo.work);
  repoName = repo.name;
  base = `/api/v1/repos/${org}/${repoName}/releases`;
}, 120_000);
afterAll(async () => {
  await replica?.close();
  await s?.close();
  await minio?.stop();
});

async function objects(prefix = 'releases/'): Promise<{ name: string; size: number }[]> {
  const out: { name: string; size: number }[] = [];
  for await (const o of minio.client().listObjectsV2(BUCKET, prefix, true)) {
    out.push({ name: (o as { name: string }).name, size: (o as { size: number }).size });
  }
  return out;
}

async function incomplete(): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const u of minio.client().listIncompleteUploads(BUCKET, 'releases/', true)) out.push(u);
  return out;
}

function upload(id: number, name: string, size: number, seed: number) {
  return postMultipart(`${s.url}${base}/${id}/assets`, owner.token, [
    { field: 'attachment', filename: name, data: { size, stream: pattern(size, seed) } },
  ]);
}

describe('releases on MinIO', () => {
  test('acceptance: a 5 MB asset of an existing tag is stored in the bucket, listed, downloaded once and deleted with its release', async () => {
    const rel = await owner.client.post(base, { tag_name: 'v1.0', name: 'One' });
    expect(rel.status).toBe(201);
    const id = rel.body.data.id;
    const size = 5 * MiB;
    const want = await digest(pattern(size, 5));
    const up = await upload(id, 'five.bin', size, 5);
    expect(up.status).toBe(201);
    const list = await s.anon.get(`${base}/${id}/assets`);
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0]).toMatchObject({ name: 'five.bin', size, digest: `sha256:${want.sha}` });
    const dl = await fetch(list.body.data[0].browser_download_url);
    expect(dl.status).toBe(200);
    expect(await digest(Readable.fromWeb(dl.body as never))).toEqual(want);
    expect((await s.anon.get(`${base}/${id}/assets`)).body.data[0].download_count).toBe(1);
    const stored = await objects(`releases/`);
    expect(stored).toEqual([{ name: expect.stringMatching(new RegExp(`^releases/\\d+/${id}/`)), size }]);

    expect((await owner.client.delete(`${base}/${id}`)).status).toBe(204);
    expect(await objects()).toEqual([]);
  });

  test('when a 200 MB asset is uploaded and downloaded, then the bytes and the digest are exact', async () => {
    const rel = await owner.client.post(base, { tag_name: 'big', target_commitish: 'main' });
    const id = rel.body.data.id;
    const size = 200 * MiB + 17;
    const want = await digest(pattern(size, 11));
    const up = await upload(id, 'big.bin', size, 11);
    expect(up.status).toBe(201);
    expect(up.body.data).toMatchObject({ size, digest: `sha256:${want.sha}` });
    const dl = await fetch(up.body.data.browser_download_url);
    expect(dl.headers.get('content-length')).toBe(String(size));
    expect(await digest(Readable.fromWeb(dl.body as never))).toEqual(want);
    // a replica with redirects on sends the client to MinIO with a presigned URL
    const viaReplica = `${replica.url}${base}/${id}/assets/${up.body.data.id}/download`;
    const redirect = await fetch(viaReplica, { redirect: 'manual' });
    expect(redirect.status).toBe(302);
    const location = redirect.headers.get('location')!;
    expect(location.startsWith(minio.url)).toBe(true);
    expect(location).toContain('X-Amz-Expires=300');
    const ranged = await fetch(location, { headers: { range: 'bytes=0-1023' } });
    expect(ranged.status).toBe(206);
    expect(Buffer.from(await ranged.arrayBuffer()).length).toBe(1024);
    const tampered = await fetch(location.replace('X-Amz-Expires=300', 'X-Amz-Expires=3000'));
    expect(tampered.status).toBe(403);
    await tampered.arrayBuffer();
    expect((await s.anon.get(`${base}/${id}/assets`)).body.data[0].download_count).toBe(2);
    expect((await owner.client.delete(`${base}/${id}`)).status).toBe(204);
    expect(await objects()).toEqual([]);
  }, 180_000);

  test('when MinIO is stopped, then uploads and downloads answer 503 and nothing half-written remains', async () => {
    const rel = await owner.client.post(base, { tag_name: 'v2.0' });
    const id = rel.body.data.id;
    const kept = await upload(id, 'kept.bin', 1000, 3);
    expect(kept.status).toBe(201);
    const stored = await objects();

    await minio.halt();
    try {
      const r = await upload(id, 'down.bin', 6 * MiB, 4);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('storage_unavailable');
      const dl = await fetch(kept.body.data.browser_download_url);
      expect(dl.status).toBe(503);
      expect(((await dl.json()) as { error: { code: string } }).error.code).toBe('storage_unavailable');
    } finally {
      await minio.resume();
    }
    // stopped in the middle of a multipart upload: the part in flight fails, the server answers 503
    let halted: Promise<void> | undefined;
    let sent = 0;
    const size = 64 * MiB;
    const stream = pattern(size, 9).on('data', (c: Buffer) => {
      sent += c.length;
      if (sent > 24 * MiB && halted === undefined) halted = minio.halt();
    });
    const mid = await postMultipart(`${s.url}${base}/${id}/assets`, owner.token, [
      { field: 'attachment', filename: 'mid.bin', data: { size, stream } },
    ]).catch((e: unknown) => ({ status: 0, body: { error: { code: String(e) } } }));
    await halted;
    await minio.resume();
    // the client may see the 503 or the connection closing while it still sends
    if (mid.status !== 0) expect([mid.status, mid.body.error.code]).toEqual([503, 'storage_unavailable']);
    const assets = (await s.anon.get(`${base}/${id}/assets`)).body.data;
    expect(assets.map((a: any) => a.name)).toEqual(['kept.bin']);
    await s.running.services.releases.assets.sweep(0);
    expect(await objects()).toEqual(stored);
    expect(await incomplete()).toEqual([]);
    const back = await fetch(kept.body.data.browser_download_url);
    expect(back.status).toBe(200);
    expect((await digest(Readable.fromWeb(back.body as never))).size).toBe(1000);
  }, 120_000);

  test('when an agent sends a step log to one replica, then the other reads it from the bucket', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS }, 'ci');
    await repo.push();
    const agent = await newAgent(s);
    let job: any;
    for (let i = 0; i < 50 && job === undefined; i++) {
      const r = await agent.post('/api/v1/ci/poll');
      if (r.status === 200) job = r.body;
      else await new Promise((res) => setTimeout(res, 200));
    }
    expect(job).toBeDefined();
    const step = job.steps[0];
    const log = await agent.post(`/api/v1/ci/steps/${step.id}/log?offset=0`, 'hello from the bucket\n', {
      'content-type': 'text/plain',
    });
    expect(log.status).toBe(200);
    expect((await objects('logs/')).length).toBeGreaterThan(0);
    const other = new Client(replica.url, owner.token);
    const read = await other.get(
      `/api/v1/repos/${org}/${repo.name}/pipelines/${job.number ?? 1}/steps/1/log`,
    );
    expect(read.status).toBe(200);
    expect(read.text).toBe('hello from the bucket\n');
    // the store unreachable: the agent is told to retry (503), and a retry with the same offset works
    await minio.halt();
    try {
      const down = await agent.post(`/api/v1/ci/steps/${step.id}/log?offset=22`, 'more\n', {
        'content-type': 'text/plain',
      });
      expect([down.status, down.body.error.code]).toEqual([503, 'storage_unavailable']);
      const unreadable = await other.get(
        `/api/v1/repos/${org}/${repo.name}/pipelines/${job.number ?? 1}/steps/1/log`,
      );
      expect([unreadable.status, unreadable.body.error.code]).toEqual([503, 'storage_unavailable']);
    } finally {
      await minio.resume();
    }
    const retry = await agent.post(`/api/v1/ci/steps/${step.id}/log?offset=22`, 'more\n', {
      'content-type': 'text/plain',
    });
    expect(retry.status).toBe(200);
    expect(
      (await other.get(`/api/v1/repos/${org}/${repo.name}/pipelines/${job.number ?? 1}/steps/1/log`)).text,
    ).toBe('hello from the bucket\nmore\n');
    // nothing of it on the local disk of either replica
    const local = await fs.readdir(`${s.dataDir}/blobs`).catch(() => [] as string[]);
    expect(local.filter((n) => n !== '.incoming')).toEqual([]);
  });
});
