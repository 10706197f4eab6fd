/**
 * Agent pools on the server side: pipeline file labels route a pipeline to the agents polling with
 * exactly those labels, the queue figures per label set with their version and long-poll, and the
 * admin list and deregistration of agents.
 */
import { describe, expect, test } from '@jest/globals';
import { uniq, type Client, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { commitFiles, gitRepo, newAgent } from '../helpers/ci.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const labelled = (labels: string) => `labels: ${labels}
steps:
  - name: build
    image: alpine:3
    commands: ["echo building"]
`;

/** Pushes a pipeline file to a new repository; returns the pipeline's API path. */
async function push(file: string): Promise<string> {
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': file });
  await repo.push();
  return `/api/v1/repos/${org}/${repo.name}/pipelines/1`;
}

const q = (labels: string) => `/api/v1/ci/queue?labels=${encodeURIComponent(labels)}`;

describe('pool labels', () => {
  test('when a pipeline names labels, then only an agent polling with exactly those labels claims it', async () => {
    const pool = uniq('gpu');
    const api = await push(labelled(`{pool: ${pool}, size: 2}`));
    const agent = await newAgent(s);
    expect((await agent.post('/api/v1/ci/poll')).status).toBe(204);
    expect((await agent.post(`/api/v1/ci/poll?labels=pool=${pool}`)).status).toBe(204);
    expect((await agent.post(`/api/v1/ci/poll?labels=pool=${pool},size=2,arch=arm64`)).status).toBe(204);
    const pending = await owner.client.get(api);
    expect(pending.body.status).toBe('pending');

    const job = await agent.post(
      `/api/v1/ci/poll?labels=${encodeURIComponent(`size=2,pool=${pool}`)}`,
      undefined,
      {
        'X-Svc-Agent-Instance': 'gpu-0',
      },
    );
    expect(job.status).toBe(200);
    expect((await owner.client.get(api)).body).toMatchObject({
      status: 'running',
      id: job.body.pipeline_id,
      labels: { pool, size: '2' },
    });
    expect(job.body.labels).toEqual({ pool, size: '2' });
  });

  test('when the labels of a pipeline file are invalid, then the pipeline is an error naming the field', async () => {
    const api = await push(labelled('{"bad key!": x}'));
    const p = await owner.client.get(api);
    expect(p.body.status).toBe('error');
    expect(p.body.error_message).toMatch(/line 1 \(labels\.bad key!\): a label key/);
  });

  test('when an agent polls with malformed labels, then it gets 400 with the error envelope', async () => {
    const agent = await newAgent(s);
    for (const bad of ['pool', 'pool=a,pool=b', 'po ol=x', `k=${'v'.repeat(64)}`]) {
      const r = await agent.post(`/api/v1/ci/poll?labels=${encodeURIComponent(bad)}`);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('validation_failed');
      expect(r.body.error.message).toMatch(/labels/);
    }
  });
});

describe('queue figures per label set', () => {
  test('when pipelines of two label sets are queued, then each set counts its own, with live agents polling with it', async () => {
    const a = uniq('a');
    const b = uniq('b');
    const agent = await newAgent(s);
    expect(
      (await agent.post(`/api/v1/ci/poll?labels=pool=${a}`, undefined, { 'X-Svc-Agent-Instance': 'a-0' }))
        .status,
    ).toBe(204);
    await push(labelled(`{pool: ${a}}`));
    await push(labelled(`{pool: ${a}}`));
    await push(labelled(`{pool: ${b}}`));
    const ra = await s.admin.get(q(`pool=${a}`));
    expect(ra.status).toBe(200);
    expect(ra.body).toEqual({ pending: 2, running: 0, agents: 1, version: expect.any(String) });
    expect((await agent.get(q(`pool=${b}`))).body).toMatchObject({ pending: 1, running: 0, agents: 0 });
    const claimed = await agent.post(`/api/v1/ci/poll?labels=pool=${a}`, undefined, {
      'X-Svc-Agent-Instance': 'a-0',
    });
    expect(claimed.status).toBe(200);
    const after = await s.admin.get(q(`pool=${a}`));
    expect(after.body).toMatchObject({ pending: 1, running: 1, agents: 1 });
    expect(after.body.version).not.toBe(ra.body.version);
    // without labels: every pipeline, as before
    const all = await s.admin.get('/api/v1/ci/queue');
    expect(all.body.pending).toBeGreaterThanOrEqual(2);
  });

  test('when a watcher long-polls with the current version, then the answer comes once a pipeline of its set is queued', async () => {
    const pool = uniq('w');
    const first = await s.admin.get(q(`pool=${pool}`));
    expect(first.body).toMatchObject({ pending: 0, running: 0, agents: 0 });
    // a stale version answers at once
    const stale = await s.admin.get(`${q(`pool=${pool}`)}&since=x&wait=30`);
    expect(stale.body.version).toBe(first.body.version);
    // unchanged figures: the wait elapses and the same version comes back
    const idle = await s.admin.get(`${q(`pool=${pool}`)}&since=${first.body.version}&wait=1`);
    expect(idle.body).toEqual(first.body);

    const watching = s.admin.get(`${q(`pool=${pool}`)}&since=${first.body.version}&wait=60`);
    await push(labelled(`{pool: ${pool}}`));
    const changed = await watching;
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ pending: 1, running: 0 });
    expect(changed.body.version).not.toBe(first.body.version);
  });

  test('when the queue is asked badly or by a non-admin user, then 400 or 403', async () => {
    expect((await s.admin.get('/api/v1/ci/queue?labels=nope')).status).toBe(400);
    expect((await s.admin.get('/api/v1/ci/queue?since=1&wait=61')).status).toBe(400);
    const r = await owner.client.get('/api/v1/ci/queue');
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('forbidden');
  });
});

describe('admin agents', () => {
  test('when an admin lists agents, then each shows its instances with their labels and running pipelines', async () => {
    const pool = uniq('l');
    const name = uniq('listed');
    const reg = await s.admin.post('/api/v1/admin/agents', { name });
    const agent: Client = s.anon.as(reg.body.data.token);
    await push(labelled(`{pool: ${pool}}`));
    const job = await agent.post(`/api/v1/ci/poll?labels=pool=${pool}`, undefined, {
      'X-Svc-Agent-Instance': 'pod-1',
    });
    expect(job.status).toBe(200);
    const list = await s.admin.get('/api/v1/admin/agents');
    expect(list.status).toBe(200);
    const mine = list.body.data.find((a: any) => a.name === name);
    expect(mine).toMatchObject({
      id: reg.body.data.id,
      running_pipelines: [job.body.pipeline_id],
      instances: [{ name: 'pod-1', labels: { pool }, live: true, running_pipelines: [job.body.pipeline_id] }],
    });
    expect(typeof mine.created_at).toBe('string');
    expect((await owner.client.get('/api/v1/admin/agents')).status).toBe(403);
  });

  test('when an agent is deregistered, then its token stops working and its running pipeline becomes error', async () => {
    const pool = uniq('d');
    const name = uniq('gone');
    const reg = await s.admin.post('/api/v1/admin/agents', { name });
    const agent: Client = s.anon.as(reg.body.data.token);
    const api = await push(labelled(`{pool: ${pool}}`));
    expect((await agent.post(`/api/v1/ci/poll?labels=pool=${pool}`)).status).toBe(200);

    expect((await owner.client.delete(`/api/v1/admin/agents/${reg.body.data.id}`)).status).toBe(403);
    const del = await s.admin.delete(`/api/v1/admin/agents/${reg.body.data.id}`);
    expect(del.status).toBe(204);
    expect((await agent.post('/api/v1/ci/poll')).status).toBe(401);
    const p = await owner.client.get(api);
    expect(p.body).toMatchObject({ status: 'error', error_message: `agent ${name} was deregistered` });
    const again = await s.admin.delete(`/api/v1/admin/agents/${reg.body.data.id}`);
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('not_found');
    const list = await s.admin.get('/api/v1/admin/agents');
    expect(list.body.data.some((a: any) => a.name === name)).toBe(false);
  });
});
