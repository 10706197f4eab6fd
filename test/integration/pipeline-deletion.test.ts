/**
 * Pipeline deletion (the service the web interface's pipeline pages call; the API has no
 * endpoint): exactly the pipelines named or failed go, with their steps and their log objects in
 * a real MinIO bucket; pending and running ones are refused whole; numbers are never reused.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { TWO_STEPS, commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { startMinio, type MinioServer } from '../helpers/minio.ts';
import { startTestServer, type Client, type TestServer, type TestUser } from '../helpers/server.ts';

const BUCKET = 'triad-deletion';
let minio: MinioServer;
let s: TestServer;
let owner: TestUser;
let org: string;
let agent: Client;

beforeAll(async () => {
  minio = await startMinio();
  s = await startTestServer({
    TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
    TRIAD_S3_ACCESS_KEY: minio.accessKey,
    TRIAD_S3_SECRET_KEY: minio.secretKey,
    TRIAD_S3_BUCKET: BUCKET,
    TRIAD_S3_REGION: minio.region,
  });
  owner = await s.newUser();
  org = await s.newOrg(owner);
  agent = await newAgent(s);
}, 120_000);
afterAll(async () => {
  await s?.close();
  await minio?.stop();
});

const deletion = () => s.running.services.pipelines.deletion;
const api = (r: GitRepo, rest = '') => `/api/v1/repos/${org}/${r.name}/pipelines${rest}`;

/** Pushes one commit with a two-step pipeline file: a new pending pipeline. */
async function push(r: GitRepo, n: number): Promise<void> {
  await commitFiles(r, { '.pipeline.yml': TWO_STEPS, 'n.txt': String(n) }, `change ${n}`);
  await r.push();
}

/** Claims the next pipeline and ends it with `outcome`, each step writing a line of log. */
async function finish(outcome: 'success' | 'failure'): Promise<number> {
  const claim = await agent.post('/api/v1/ci/poll');
  expect(claim.status).toBe(200);
  const job = claim.body;
  for (const [i, st] of (job.steps as { id: number; name: string }[]).entries()) {
    expect((await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status: 'running' })).status).toBe(200);
    const log = await agent.post(`/api/v1/ci/steps/${st.id}/log?offset=0`, `log of ${st.name}\n`, {
      'content-type': 'text/plain',
    });
    expect(log.status).toBe(200);
    const failed = outcome === 'failure' && i === 0;
    const status = failed ? 'failure' : 'success';
    const done = await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status, exit_code: failed ? 1 : 0 });
    expect(done.status).toBe(200);
    if (failed) break;
  }
  const fin = await agent.put(`/api/v1/ci/pipelines/${job.pipeline_id}/status`, { status: outcome });
  expect(fin.status).toBe(200);
  return job.pipeline_id;
}

async function objects(prefix: string): Promise<string[]> {
  const names: string[] = [];
  for await (const o of minio.client().listObjectsV2(BUCKET, prefix, true))
    names.push((o as { name: string }).name);
  return names;
}

async function statuses(r: GitRepo): Promise<[number, string][]> {
  const list = await owner.client.get(api(r, '?per_page=100'));
  expect(list.status).toBe(200);
  return (list.body.pipelines as { number: number; status: string }[]).map((p) => [p.number, p.status]);
}

describe('pipeline deletion', () => {
  test('single, bulk and all failed remove exactly those pipelines and their logs; active ones are refused whole', async () => {
    const repo = await gitRepo(s, owner, org);
    const other = await gitRepo(s, owner, org);
    // other: #1 failed (must survive everything below)
    await push(other, 0);
    const otherFailed = await finish('failure');
    // repo: #1 success, #2 failure, #3 failure, #4 pending
    const ids: number[] = [];
    for (const [n, outcome] of [
      [1, 'success'],
      [2, 'failure'],
      [3, 'failure'],
    ] as const) {
      await push(repo, n);
      ids.push(await finish(outcome));
    }
    await push(repo, 4);
    expect(await statuses(repo)).toEqual([
      [4, 'pending'],
      [3, 'failure'],
      [2, 'failure'],
      [1, 'success'],
    ]);
    for (const id of [...ids, otherFailed]) expect(await objects(`logs/${id}/`)).not.toEqual([]);

    // refused whole: a pending pipeline among them (409), an unknown number (404), none at all (400)
    await expect(deletion().delete(repo.id, [1, 4])).rejects.toMatchObject({ status: 409 });
    await expect(deletion().delete(repo.id, [1, 99])).rejects.toMatchObject({ status: 404 });
    await expect(deletion().delete(repo.id, [])).rejects.toMatchObject({ status: 400 });
    await expect(deletion().delete(other.id, [2])).rejects.toMatchObject({ status: 404 });
    expect((await statuses(repo)).length).toBe(4);

    // all failed, up to the newest number seen when the count was shown
    expect(await deletion().failedSummary(repo.id)).toEqual({ failed: 2, newest: 4 });
    expect(await deletion().deleteFailed(repo.id, 4)).toEqual([2, 3]);
    expect(await statuses(repo)).toEqual([
      [4, 'pending'],
      [1, 'success'],
    ]);
    expect(await objects(`logs/${ids[1]}/`)).toEqual([]);
    expect(await objects(`logs/${ids[2]}/`)).toEqual([]);
    expect(await objects(`logs/${ids[0]}/`)).not.toEqual([]);
    expect(await objects(`logs/${otherFailed}/`)).not.toEqual([]);
    expect(await statuses(other)).toEqual([[1, 'failure']]);
    expect((await owner.client.get(api(repo, '/2'))).status).toBe(404);
    expect((await owner.client.get(api(repo, '/2/steps/1/log'))).status).toBe(404);

    // single: the read answers 404 afterwards, its log objects are gone
    expect(await deletion().delete(repo.id, [1])).toEqual([1]);
    expect((await owner.client.get(api(repo, '/1'))).status).toBe(404);
    expect(await objects(`logs/${ids[0]}/`)).toEqual([]);

    // the newest pipeline, once cancelled and deleted, leaves its number used
    expect((await owner.client.post(api(repo, '/4/cancel'))).status).toBe(200);
    expect(await deletion().delete(repo.id, [4])).toEqual([4]);
    expect(await statuses(repo)).toEqual([]);
    await push(repo, 5);
    expect(await statuses(repo)).toEqual([[5, 'pending']]);
    expect((await owner.client.post(api(repo, '/5/cancel'))).status).toBe(200);
  });

  test('a failed pipeline numbered after the confirmation is not taken by "delete all failed"', async () => {
    const repo = await gitRepo(s, owner, org);
    await push(repo, 1);
    await finish('failure');
    const seen = await deletion().failedSummary(repo.id);
    expect(seen).toEqual({ failed: 1, newest: 1 });
    await push(repo, 2);
    await finish('failure');
    expect(await deletion().deleteFailed(repo.id, seen.newest)).toEqual([1]);
    expect(await statuses(repo)).toEqual([[2, 'failure']]);
  });
});
