import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { ServerClient } from '../../agent/client.ts';
import { LogShipper } from '../../agent/log-shipper.ts';
import type { QueueWaker } from '../../src/pipelines/queue-waker.ts';
import { startTestServer, type Client, type TestServer, type TestUser } from '../helpers/server.ts';
import { serverWithOrg } from '../helpers/factories.ts';
import { TWO_STEPS, commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { sleep, waitFor } from '../helpers/wait.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
let agent: Client;
beforeAll(async () => {
  ({ s, owner, org } = await serverWithOrg());
  agent = await newAgent(s);
});
afterAll(async () => {
  await s.close();
});

const path = (r: GitRepo, rest = '') => `/api/v1/repos/${org}/${r.name}/pipelines${rest}`;

/** Each test starts with an empty queue: whatever is pending is claimed and reported cancelled. */
beforeEach(async () => {
  for (;;) {
    const r = await agent.post('/api/v1/ci/poll');
    if (r.status === 204) return;
    await agent.put(`/api/v1/ci/pipelines/${r.body.pipeline_id}/status`, { status: 'cancelled' });
  }
});

async function claim(a: Client = agent): Promise<any> {
  const r = await a.post('/api/v1/ci/poll');
  expect(r.status).toBe(200);
  return r.body;
}

async function pushedPipeline(file = TWO_STEPS): Promise<GitRepo> {
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': file });
  await repo.push();
  return repo;
}

describe('agent protocol', () => {
  test('when the acceptance flow runs, then statuses, timestamps and the log are visible to users', async () => {
    const repo = await gitRepo(s, owner, org);
    const sha = await commitFiles(repo, { '.pipeline.yml': TWO_STEPS }, 'add ci');
    await repo.push();
    const job = await claim();
    expect(job).toMatchObject({
      number: 1,
      commit_node: sha,
      branch: 'main',
      event: 'push',
      clone_url: `${s.url}/${org}/${repo.name}`,
      org,
      repo: repo.name,
      vcs: 'git',
      ci_env: {
        CI: 'true',
        CI_PIPELINE_ID: String(job.pipeline_id),
        CI_COMMIT: sha,
        CI_BRANCH: 'main',
        CI_REPO: `${org}/${repo.name}`,
      },
    });
    expect(job.steps).toEqual([
      {
        id: expect.any(Number),
        number: 1,
        name: 'build',
        image: 'alpine:3',
        commands: ['echo building', 'echo done'],
        environment: { MODE: 'test' },
        status: 'pending',
        timeout_seconds: 3600,
      },
      {
        id: expect.any(Number),
        number: 2,
        name: 'test',
        image: 'alpine:3',
        commands: ['echo testing'],
        environment: {},
        status: 'pending',
        timeout_seconds: 3600,
      },
    ]);
    expect(job.log_max_bytes).toBe(16 * 1024 * 1024);
    expect(typeof job.clone_token).toBe('string');
    // the clone credential reads its repository but cannot manage the user's tokens
    const clone = s.anon.as(job.clone_token);
    expect((await clone.get('/api/v1/user/tokens')).status).toBe(403);
    expect((await clone.post('/api/v1/user/tokens', { name: 'x', scopes: ['repo:read'] })).status).toBe(403);
    const running = await s.anon.get(path(repo, '/1'));
    expect(running.body.status).toBe('running');
    expect(running.body.started_at).not.toBeNull();

    const t0 = new Date(Date.now() - 2000).toISOString();
    const t1 = new Date().toISOString();
    for (const st of job.steps) {
      expect(
        (await agent.put(`/api/v1/ci/steps/${st.id}/status`, { status: 'running', started_at: t0 })).status,
      ).toBe(200);
      const log = await agent.post(`/api/v1/ci/steps/${st.id}/log?offset=0`, `output of ${st.name}\n`, {
        'content-type': 'text/plain',
      });
      expect(log.status).toBe(200);
      const done = await agent.put(`/api/v1/ci/steps/${st.id}/status`, {
        status: 'success',
        exit_code: 0,
        started_at: t0,
        finished_at: t1,
      });
      expect(done.status).toBe(200);
      expect(done.body.pipeline_status).toBe('running');
    }
    const fin = await agent.put(`/api/v1/ci/pipelines/${job.pipeline_id}/status`, {
      status: 'success',
      finished_at: t1,
    });
    expect(fin.status).toBe(200);

    const p = await s.anon.get(path(repo, '/1'));
    expect(p.body.status).toBe('success');
    expect(p.body.finished_at).toBe(t1);
    expect(p.body.steps.map((x: any) => [x.status, x.exit_code, x.started_at, x.finished_at])).toEqual([
      ['success', 0, t0, t1],
      ['success', 0, t0, t1],
    ]);
    const log = await owner.client.get(path(repo, '/1/steps/1/log'));
    expect(log.status).toBe(200);
    expect(log.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(log.headers.get('x-svc-step-name')).toBe('build');
    expect(log.headers.get('x-svc-step-number')).toBe('1');
    expect(log.headers.get('x-svc-log-truncated')).toBeNull();
    expect(log.text).toBe('output of build\n');
    const byName = await owner.client.get(path(repo, '/1/steps/test/log'));
    expect(byName.text).toBe('output of test\n');
    expect(byName.headers.get('x-svc-step-number')).toBe('2');

    // the clone credential is revoked once the pipeline finished
    const again = await fetch(`${job.clone_url}/info/refs?service=git-upload-pack`, {
      headers: { authorization: `Basic ${Buffer.from(`x:${job.clone_token}`).toString('base64')}` },
    });
    expect(again.status).toBe(401);
  });

  test('when nothing is pending, then poll answers 204 with an empty body', async () => {
    const r = await agent.post('/api/v1/ci/poll');
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
  });

  test('when a user token calls an agent endpoint, or an agent token a user endpoint, then 401', async () => {
    for (const p of ['/api/v1/ci/poll', '/api/v1/ci/heartbeat']) {
      const r = await owner.client.post(p);
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('unauthorized');
    }
    expect((await s.anon.post('/api/v1/ci/poll')).status).toBe(401);
    const asUser = await agent.get('/api/v1/user');
    expect(asUser.status).toBe(401);
  });

  test('when an admin registers an agent, then the token works once shown; non-admins get 403', async () => {
    const r = await s.admin.post('/api/v1/admin/agents', { name: 'builder' });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({ id: expect.any(Number), name: 'builder', token: expect.any(String) });
    expect((await s.anon.as(r.body.data.token).post('/api/v1/ci/heartbeat')).status).toBe(200);
    expect((await owner.client.post('/api/v1/admin/agents', { name: 'x' })).status).toBe(403);
    expect((await s.admin.post('/api/v1/admin/agents', {})).status).toBe(400);
  });

  test('when 20 agents poll at once for 10 pipelines, then each pipeline is claimed exactly once', async () => {
    const repo = await pushedPipeline();
    for (let i = 0; i < 9; i++) {
      expect((await owner.client.post(path(repo, '/1/rerun'))).status).toBe(201);
    }
    const agents = await Promise.all(Array.from({ length: 20 }, () => newAgent(s)));
    const results = await Promise.all(agents.map((a) => a.post('/api/v1/ci/poll')));
    const ids = results.filter((r) => r.status === 200).map((r) => r.body.pipeline_id);
    expect(results.filter((r) => r.status === 204)).toHaveLength(10);
    expect(ids).toHaveLength(10);
    expect(new Set(ids).size).toBe(10);
    const list = await s.anon.get(path(repo, '?status=running'));
    expect(list.body.total).toBe(10);
  });

  test('when an agent long-polls and a pipeline is created, then it is claimed, woken by a notification', async () => {
    const repo = await pushedPipeline();
    await claim();
    const waker = (s.running.services.pipelines as unknown as { waker: QueueWaker }).waker;
    const seen = waker.seen;
    const waiting = agent.post('/api/v1/ci/poll?wait=20');
    await new Promise((r) => setTimeout(r, 300));
    const rerun = await owner.client.post(path(repo, '/1/rerun'));
    expect(rerun.status).toBe(201);
    const r = await waiting;
    expect(r.status).toBe(200);
    expect(r.body.number).toBe(rerun.body.number);
    // the rerun's NOTIFY reached the waker (how soon it wakes a poll: npm run bench:ci)
    expect(waker.seen).toBeGreaterThan(seen);
  });

  test('when a long poll finds nothing, then it answers 204 after the wait', async () => {
    const started = Date.now();
    const r = await agent.post('/api/v1/ci/poll?wait=1');
    expect(r.status).toBe(204);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect((await agent.post('/api/v1/ci/poll?wait=31')).status).toBe(400);
  });

  test('when a user cancels a running pipeline, then steps are cancelled and the agent is told', async () => {
    const repo = await pushedPipeline();
    const job = await claim();
    await agent.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, { status: 'running' });
    const outsider = await s.newUser();
    expect((await outsider.client.post(path(repo, '/1/cancel'))).status).toBe(403);
    const member = await s.newUser(undefined, { scopes: ['ci:read'] });
    await s.addMember(org, member);
    expect((await member.client.post(path(repo, '/1/cancel'))).status).toBe(403);

    const c = await owner.client.post(path(repo, '/1/cancel'));
    expect(c.status).toBe(200);
    expect(c.body.status).toBe('cancelled');
    expect(c.body.finished_at).not.toBeNull();
    expect(c.body.steps.map((x: any) => x.status)).toEqual(['cancelled', 'cancelled']);

    const hb = await agent.post('/api/v1/ci/heartbeat');
    expect(hb.body.cancelled_pipelines).toEqual([job.pipeline_id]);
    const st = await agent.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, {
      status: 'success',
      exit_code: 0,
    });
    expect(st.body.pipeline_status).toBe('cancelled');
    expect(st.body.data.status).toBe('cancelled');
    await agent.put(`/api/v1/ci/pipelines/${job.pipeline_id}/status`, { status: 'cancelled' });
    expect((await agent.post('/api/v1/ci/heartbeat')).body.cancelled_pipelines).toEqual([]);
    expect((await s.anon.get(path(repo, '/1'))).body.status).toBe('cancelled');

    const again = await owner.client.post(path(repo, '/1/cancel'));
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
  });

  test('when a pending pipeline is cancelled, then it is never handed to an agent', async () => {
    const repo = await pushedPipeline();
    const c = await owner.client.post(path(repo, '/1/cancel'));
    expect(c.body.steps.map((x: any) => x.status)).toEqual(['cancelled', 'cancelled']);
    expect((await agent.post('/api/v1/ci/poll')).status).toBe(204);
  });

  test('when a pipeline is rerun, then a new pending pipeline from the same commit is returned', async () => {
    const repo = await pushedPipeline();
    const first = await s.anon.get(path(repo, '/1'));
    const other = await s.newUser();
    await s.addMember(org, other);
    const r = await other.client.post(path(repo, '/1/rerun'));
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      number: 2,
      commit_node: first.body.commit_node,
      events: ['push'],
      status: 'pending',
      trigger_by: other.id,
      trigger_user: { id: other.id, username: other.username },
    });
    expect(r.body.steps).toHaveLength(2);
    expect((await s.anon.post(path(repo, '/1/rerun'))).status).toBe(401);
    expect((await owner.client.post(path(repo, '/99/rerun'))).status).toBe(404);
  });

  test('log append: 1 MiB limit, offset replay is idempotent, a gap is a conflict', async () => {
    await pushedPipeline();
    const job = await claim();
    const step = job.steps[0].id;
    const big = await agent.post(`/api/v1/ci/steps/${step}/log`, Buffer.alloc(1024 * 1024 + 1, 97));
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('payload_too_large');
    expect((await agent.post(`/api/v1/ci/steps/${step}/log?offset=0`, 'abc')).body.data).toEqual({
      size: 3,
      stored: 3,
    });
    expect((await agent.post(`/api/v1/ci/steps/${step}/log?offset=0`, 'abc')).body.data).toEqual({
      size: 3,
      stored: 0,
    });
    expect((await agent.post(`/api/v1/ci/steps/${step}/log?offset=1`, 'bcdef')).body.data).toEqual({
      size: 6,
      stored: 3,
    });
    const gap = await agent.post(`/api/v1/ci/steps/${step}/log?offset=10`, 'x');
    expect(gap.status).toBe(409);
    expect(gap.headers.get('x-svc-log-size')).toBe('6');
    expect((await agent.post(`/api/v1/ci/steps/${step}/log`, 'g\n')).body.data).toEqual({
      size: 8,
      stored: 2,
    });
    const other = await newAgent(s);
    expect((await other.post(`/api/v1/ci/steps/${step}/log`, 'x')).status).toBe(404);
    expect((await agent.post('/api/v1/ci/steps/999999/log', 'x')).status).toBe(404);
  });

  test('log read: capped at 16 MiB with X-Svc-Log-Truncated; token and ci:read required', async () => {
    const repo = await pushedPipeline();
    const job = await claim();
    const step = job.steps[1].id;
    const mib = Buffer.alloc(1024 * 1024, 120);
    for (let i = 0; i < 17; i++) {
      const r = await agent.post(`/api/v1/ci/steps/${step}/log?offset=${i * mib.length}`, mib);
      expect(r.status).toBe(200);
    }
    const log = await owner.client.get(path(repo, '/1/steps/2/log'));
    expect(log.status).toBe(200);
    expect(log.headers.get('x-svc-log-truncated')).toBe('true');
    expect(log.text.length).toBe(16 * 1024 * 1024);
    expect((await s.anon.get(path(repo, '/1/steps/2/log'))).status).toBe(401);
    const noCi = await s.newUser(undefined, { scopes: ['repo:read'] });
    const denied = await noCi.client.get(path(repo, '/1/steps/2/log'));
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('forbidden');
    expect((await owner.client.get(path(repo, '/1/steps/9/log'))).status).toBe(404);
    const notStarted = await owner.client.get(path(repo, '/1/steps/1/log'));
    expect(notStarted.status).toBe(404);
    expect(notStarted.body.error.code).toBe('not_found');
    expect((await owner.client.get(path(repo, '/1/steps/nope/log'))).status).toBe(404);
    expect((await owner.client.get(path(repo, '/7/steps/1/log'))).status).toBe(404);
  });

  test('when an agent stops sending heartbeats, then its pipeline becomes error naming the agent', async () => {
    // its own server, with a three-second agent timeout: the step report below must reach the
    // server within it after the claim (one second was missed on a loaded machine)
    const s2 = await startTestServer({ TRIAD_AGENT_TIMEOUT: '3' });
    const owner2 = await s2.newUser();
    const org2 = await s2.newOrg(owner2);
    const r = await s2.admin.post('/api/v1/admin/agents', { name: 'flaky-agent' });
    const flaky = s2.anon.as(r.body.data.token);
    const repo = await gitRepo(s2, owner2, org2);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await repo.push();
    const poll = await flaky.request('POST', '/api/v1/ci/poll', undefined, {
      'x-svc-agent-instance': 'pod-7',
    });
    expect(poll.status).toBe(200);
    const step = await flaky.put(`/api/v1/ci/steps/${poll.body.steps[0].id}/status`, { status: 'running' });
    expect([step.status, step.body.data.status]).toEqual([200, 'running']);
    const p = await waitFor(
      'the pipeline to leave running',
      async () => {
        const got = (await s2.anon.get(`/api/v1/repos/${org2}/${repo.name}/pipelines/1`)).body;
        return got.status === 'running' ? undefined : got;
      },
      20_000,
      250,
    ).finally(() => s2.close());
    expect(p.status).toBe('error');
    expect(p.error_message).toContain('flaky-agent');
    expect(p.error_message).toContain('pod-7');
    expect(p.finished_at).not.toBeNull();
    expect(p.steps.map((x: any) => x.status)).toEqual(['failure', 'skipped']);
  });

  test('the queue endpoint and gauges report pending and running pipelines', async () => {
    await pushedPipeline();
    await pushedPipeline();
    await claim();
    const q = await agent.get('/api/v1/ci/queue');
    expect(q.status).toBe(200);
    expect(q.body).toEqual({
      pending: 1,
      running: expect.any(Number),
      agents: expect.any(Number),
      version: expect.any(String),
    });
    expect(q.body.running).toBeGreaterThanOrEqual(1);
    expect((await s.admin.get('/api/v1/ci/queue')).status).toBe(200);
    expect((await owner.client.get('/api/v1/ci/queue')).status).toBe(403);
    expect((await s.anon.get('/api/v1/ci/queue')).status).toBe(401);
    const m = await s.anon.get('/metrics');
    expect(m.text).toMatch(/^triad_ci_pipelines_pending 1$/m);
    expect(m.text).toMatch(new RegExp(`^triad_ci_pipelines_running ${q.body.running}$`, 'm'));
    expect(m.text).toMatch(/^triad_ci_pipelines_claimed_total [1-9]/m);
  });
});

describe('the agent protocol, more', () => {
  test('when a pipeline is cancelled, then its clone token stops working', async () => {
    const repo = await gitRepo(s, owner, org, true);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await repo.push();
    const job = await claim();
    const basic = { authorization: `Basic ${Buffer.from(`ci:${job.clone_token}`).toString('base64')}` };
    const refs = () => fetch(`${job.clone_url}/info/refs?service=git-upload-pack`, { headers: basic });
    expect((await refs()).status).toBe(200);
    expect((await owner.client.post(path(repo, '/1/cancel'))).status).toBe(200);
    expect((await refs()).status).toBe(401);
  });

  test("the job carries each step's timeout: the file's when shorter than the server's, else the server's", async () => {
    const repo = await pushedPipeline(
      `steps:\n  - name: a\n    image: alpine\n    commands: [make]\n    timeout: 30m\n  - name: b\n    image: alpine\n    commands: [make]\n    timeout: 5h\n  - name: c\n    image: alpine\n    commands: [make]\n`,
    );
    const job = await claim();
    expect(job.repo).toBe(repo.name);
    expect(job.steps.map((x: any) => x.timeout_seconds)).toEqual([1800, 3600, 3600]);
  });

  test('when a step report races a cancel, then what the cancel answered stays true', async () => {
    const repo = await pushedPipeline();
    for (let i = 0; i < 12; i++) {
      if (i > 0) expect((await owner.client.post(path(repo, '/1/rerun'))).status).toBe(201);
      const job = await claim();
      await agent.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, { status: 'running' });
      const [cancel, report] = await Promise.all([
        owner.client.post(path(repo, `/${job.number}/cancel`)),
        agent.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, { status: 'success', exit_code: 0 }),
      ]);
      const p = (await s.anon.get(path(repo, `/${job.number}`))).body;
      expect(p.status).toBe('cancelled');
      // either the report came first (the step succeeded, then the rest was cancelled) or the
      // cancel did (the report is ignored): never a step revived after the cancel
      const first = report.body.pipeline_status === 'running' ? 'success' : 'cancelled';
      expect(p.steps.map((x: any) => x.status)).toEqual([first, 'cancelled']);
      expect(cancel.body.steps.map((x: any) => x.status)).toEqual([first, 'cancelled']);
    }
  });

  test('when the server loses the end of a log (409), then the shipper sends it again from the size the server has', async () => {
    await pushedPipeline();
    const r = await s.admin.post('/api/v1/admin/agents', { name: 'shipper' });
    const api = new ServerClient(s.url, r.body.data.token, 'jest', 'shipper-nonce');
    const a = s.anon.as(r.body.data.token);
    const job = (await a.post('/api/v1/ci/poll')).body;
    const step = job.steps[0].id;
    const shipper = new LogShipper((offset, chunk) => api.appendLog(step, offset, chunk), {
      flushIntervalMs: 20,
    });
    shipper.write(Buffer.from('first line\n'));
    for (let i = 0; i < 100 && shipper.shippedBytes < 11; i++)
      await new Promise((res) => setTimeout(res, 20));
    expect(shipper.shippedBytes).toBe(11);
    // the server's copy of the log is lost (restored storage, say)
    const c = new pg.Client({ connectionString: s.dbUrl });
    await c.connect();
    await c.query('delete from step_log_chunks where step_id = $1', [step]);
    await c.query('update pipeline_steps set log_size = 0 where id = $1', [step]);
    await c.end();
    shipper.write(Buffer.from('second line\n'));
    await shipper.close();
    await a.put(`/api/v1/ci/steps/${step}/status`, { status: 'success', exit_code: 0 });
    const log = await owner.client.get(
      `/api/v1/repos/${job.org}/${job.repo}/pipelines/${job.number}/steps/1/log`,
    );
    expect(log.text).toBe('first line\nsecond line\n');
  });
});

// A claim is kept while missing from its process's heartbeats for half the agent timeout (3 s
// here); the claim, first heartbeat and read of the pipeline below must fit in it on a loaded
// machine (with 2 s, 1 s of grace was missed).
describe('agent processes and orphaned pipelines (TRIAD_AGENT_TIMEOUT=6)', () => {
  let s2: TestServer;
  let owner2: TestUser;
  let org2: string;
  let bot: Client;
  beforeAll(async () => {
    ({
      s: s2,
      owner: owner2,
      org: org2,
    } = await serverWithOrg({ TRIAD_AGENT_TIMEOUT: '6', TRIAD_STEP_LOG_MAX_BYTES: '4096' }));
    const r = await s2.admin.post('/api/v1/admin/agents', { name: 'pool-bot' });
    bot = s2.anon.as(r.body.data.token);
  });
  afterAll(async () => {
    await s2.close();
  });

  const as = (instance: string, nonce: string) => ({
    'x-svc-agent-instance': instance,
    'x-svc-agent-nonce': nonce,
  });
  const poll = (instance: string, nonce: string) =>
    bot.request('POST', '/api/v1/ci/poll', undefined, as(instance, nonce));
  const beat = (instance: string, nonce: string, running: number[]) =>
    bot.request('POST', '/api/v1/ci/heartbeat', { running }, as(instance, nonce));
  async function queued(): Promise<GitRepo> {
    const repo = await gitRepo(s2, owner2, org2);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await repo.push();
    return repo;
  }
  const get = async (repo: GitRepo) =>
    (await s2.anon.get(`/api/v1/repos/${org2}/${repo.name}/pipelines/1`)).body;

  test('when an instance restarts, then what its old process claimed becomes error; a live twin of the same name changes nothing', async () => {
    const repo = await queued();
    const job = (await poll('pod-0', 'old')).body;
    await bot.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, { status: 'running' });
    // a second live process under the same instance name
    expect((await poll('pod-0', 'twin')).status).toBe(204);
    expect((await beat('pod-0', 'old', [job.pipeline_id])).body.cancelled_pipelines).toEqual([]);
    expect((await beat('pod-0', 'twin', [])).body.cancelled_pipelines).toEqual([]);
    expect((await get(repo)).status).toBe('running');
    // the old process is gone; a new one starts under the same name
    await new Promise((res) => setTimeout(res, 50));
    expect((await beat('pod-0', 'new', [])).status).toBe(200);
    const p = await get(repo);
    expect(p.status).toBe('error');
    expect(p.error_message).toBe(
      'agent pool-bot (instance pod-0) restarted: the process that claimed this pipeline is gone',
    );
    expect(p.steps.map((x: any) => x.status)).toEqual(['failure', 'skipped']);
    // were the old process still there, its heartbeat would tell it to stop; its reports change nothing
    expect((await beat('pod-0', 'old', [job.pipeline_id])).body.cancelled_pipelines).toEqual([
      job.pipeline_id,
    ]);
    const late = await bot.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, { status: 'success' });
    expect([late.body.data.status, late.body.pipeline_status]).toEqual(['failure', 'error']);
    await bot.put(`/api/v1/ci/pipelines/${job.pipeline_id}/status`, { status: 'success' });
    expect((await get(repo)).status).toBe('error');
  });

  test('when a process stops listing a pipeline it claimed, then after a short grace it becomes error', async () => {
    const repo = await queued();
    const job = (await poll('pod-1', 'n1')).body;
    // just claimed: the poll answer may still be on its way
    await beat('pod-1', 'n1', []);
    expect((await get(repo)).status).toBe('running');
    await sleep(3500); // past the 3 s grace
    expect((await beat('pod-1', 'n1', [])).status).toBe(200);
    const p = await get(repo);
    expect(p.status).toBe('error');
    expect(p.error_message).toBe('agent pool-bot (instance pod-1) is no longer running this pipeline');
    expect((await beat('pod-1', 'n1', [job.pipeline_id])).body.cancelled_pipelines).toEqual([
      job.pipeline_id,
    ]);
  });

  test('when a listed pipeline is cancelled, then the heartbeat says to stop it; a bad nonce is a 400', async () => {
    const repo = await queued();
    const job = (await poll('pod-2', 'n2')).body;
    expect((await beat('pod-2', 'n2', [job.pipeline_id])).body.cancelled_pipelines).toEqual([]);
    expect((await owner2.client.post(`/api/v1/repos/${org2}/${repo.name}/pipelines/1/cancel`)).status).toBe(
      200,
    );
    expect((await beat('pod-2', 'n2', [job.pipeline_id])).body.cancelled_pipelines).toEqual([
      job.pipeline_id,
    ]);
    const bad = await bot.request('POST', '/api/v1/ci/heartbeat', {}, as('pod-2', 'not a nonce!'));
    expect([bad.status, bad.body.error.code]).toEqual([400, 'validation_failed']);
    const badBody = await bot.request('POST', '/api/v1/ci/heartbeat', { running: ['x'] }, as('pod-2', 'n2'));
    expect(badBody.status).toBe(400);
  });

  test('when an agent sends more log than the server keeps, then the rest is acknowledged but not stored, and the log reads truncated', async () => {
    const repo = await queued();
    const job = (await poll('pod-3', 'n3')).body;
    const step = job.steps[0].id;
    await bot.put(`/api/v1/ci/steps/${step}/status`, { status: 'running' });
    // the process is alive and runs it: the pipeline stays running while the log is sent
    expect((await beat('pod-3', 'n3', [job.pipeline_id])).body.cancelled_pipelines).toEqual([]);
    const append = (offset: number, body: string) =>
      bot.post(`/api/v1/ci/steps/${step}/log?offset=${offset}`, body);
    expect((await append(0, 'a'.repeat(3000))).body.data).toEqual({ size: 3000, stored: 3000 });
    expect((await append(3000, 'b'.repeat(3000))).body.data).toEqual({
      size: 4096,
      stored: 1096,
      truncated: true,
    });
    const more = await append(6000, 'c'.repeat(100));
    expect([more.status, more.body.data]).toEqual([200, { size: 4096, stored: 0, truncated: true }]);
    const log = await owner2.client.get(`/api/v1/repos/${org2}/${repo.name}/pipelines/1/steps/1/log`);
    expect(log.text).toBe('a'.repeat(3000) + 'b'.repeat(1096));
    expect(log.headers.get('x-svc-log-truncated')).toBe('true');
  });
});

describe('server shutdown', () => {
  // The test's time limit (20 s) is below the poll's own wait (30 s): only the close can answer it.
  test('when the server closes, then a waiting long poll answers 204 and the close does not wait for it', async () => {
    const s3 = await startTestServer();
    const a = await newAgent(s3);
    const waiting = a.post('/api/v1/ci/poll?wait=30');
    await new Promise((res) => setTimeout(res, 300));
    const closed = s3.close();
    const r = await waiting;
    expect(r.status).toBe(204);
    await closed;
  }, 20_000);
});
