import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Agent } from '../../agent/agent.ts';
import { LocalExecutor } from '../../agent/executors/local.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { agentLogCapture, newAgent } from '../helpers/ci.ts';
import { pipelineYaml, pushWith, type Pushed } from '../helpers/serve.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/**
 * The bounds of every pipeline, server settings a pipeline file cannot change: the size of the
 * pipeline file (read for all three kinds without reading a larger one), the number of steps, the
 * whole pipeline's run time (stopped by the agent; ended by the server when an agent does not),
 * the workspace's size while a step runs, and claims that take turns between organizations.
 */

let s: TestServer;
let owner: TestUser;
beforeAll(async () => {
  s = await startTestServer({
    TRIAD_PIPELINE_FILE_MAX_BYTES: '2k',
    TRIAD_PIPELINE_MAX_STEPS: '3',
    // long enough for the disk tests' steps on a loaded machine (a full run with browser tests
    // beside it: their workspace is measured every 5 s once the clone is done; 8 s was not
    // always enough), short enough for the time-limit tests
    TRIAD_PIPELINE_TIMEOUT: '20',
    TRIAD_STEP_DISK_MAX: '1m',
  });
  owner = await s.newUser();
});
afterAll(async () => {
  await s.close();
});

/** The agents' log: printed with the error when a test fails. */
const agentLog = agentLogCapture();
const steps = (n: number, commands = ['echo hi']) =>
  pipelineYaml(Array.from({ length: n }, (_, i) => ({ name: `s${i + 1}`, commands })));

async function pipelineOf(r: { org: string; name: string }, n = 1): Promise<any> {
  return (await owner.client.get(`/api/v1/repos/${r.org}/${r.name}/pipelines/${n}`)).body;
}

async function until(r: { org: string; name: string }, pred: (p: any) => boolean, ms = 45_000): Promise<any> {
  const end = Date.now() + ms;
  for (;;) {
    const p = await pipelineOf(r);
    if (pred(p) || Date.now() > end) return p;
    await new Promise((res) => setTimeout(res, 150));
  }
}
const finished = (p: any) => ['success', 'failure', 'cancelled', 'error'].includes(p.status);

async function withAgent<T>(fn: () => Promise<T>, opts: { capacity?: number } = {}): Promise<T> {
  const token = (await s.admin.post('/api/v1/admin/agents', { name: uniq('bounds') })).body.data.token;
  const agent = new Agent({
    server: s.url,
    token,
    instance: uniq('i'),
    capacity: opts.capacity ?? 2,
    executor: new LocalExecutor({ diskCheckMs: 200 }),
    log: agentLog.log,
    pollWait: 1,
    cancelCheckMs: 300,
  });
  agentLog.reset();
  await agent.start();
  try {
    return await fn();
  } finally {
    await agent.stop();
  }
}

describe('the pipeline file', () => {
  test.each(['git', 'hg', 'fossil'] as const)(
    'when a %s commit has a pipeline file above the size limit, then its pipeline is error and says why; one within the limit is read',
    async (vcs: VcsKind) => {
      const big = `${steps(1)}${'# padding\n'.repeat(250)}`;
      expect(big.length).toBeGreaterThan(2048);
      const large = await pushWith(owner, { vcs }, (w) => fs.writeFile(path.join(w, '.pipeline.yml'), big));
      const p = await pipelineOf(large);
      expect([p.status, p.error_message]).toEqual([
        'error',
        `.pipeline.yml is ${(big.length / 1024).toFixed(1)} KiB, more than the limit of 2 KiB: it was not read`,
      ]);
      expect(p.steps).toEqual([]);
      // (for no agent of this file: its pool exists nowhere)
      const within = `labels: {pool: nowhere}\n${steps(2)}`;
      const small = await pushWith(owner, { vcs }, (w) =>
        fs.writeFile(path.join(w, '.pipeline.yml'), within),
      );
      expect((await pipelineOf(small)).status).toBe('pending');
    },
    60_000,
  );

  test('when a pipeline file declares more steps than the limit, then its pipeline is error and names the limit', async () => {
    const r = await pushWith(owner, { vcs: 'git' }, (w) =>
      fs.writeFile(path.join(w, '.pipeline.yml'), steps(4)),
    );
    const p = await pipelineOf(r);
    expect(p.status).toBe('error');
    expect(p.error_message).toBe('.pipeline.yml line 14 (steps): 4 steps, more than the limit of 3');
  });
});

describe('a running pipeline', () => {
  test('when its agent does not stop it at the time limit, then the server ends it as error', async () => {
    const r = await pushWith(owner, { vcs: 'git' }, (w) =>
      fs.writeFile(path.join(w, '.pipeline.yml'), steps(1)),
    );
    const agent = await newAgent(s);
    // first in this file to run an agent: no agent of an earlier test may still hold a poll
    const job = (await agent.post('/api/v1/ci/poll')).body;
    expect(job.pipeline_timeout_seconds).toBe(20);
    expect(job.disk_max_bytes).toBe(1024 * 1024);
    // an agent alive (heartbeats) that never stops the pipeline
    const p = await until(
      r,
      (x) => {
        void agent.post('/api/v1/ci/heartbeat', { running: [job.pipeline_id] });
        return finished(x);
      },
      45_000,
    );
    expect([p.status, p.error_message]).toEqual([
      'error',
      'the pipeline ran past its time limit of 20s and its agent did not stop it',
    ]);
    // not before the limit and its grace (5 s at least)
    expect(Date.parse(p.finished_at) - Date.parse(p.started_at)).toBeGreaterThanOrEqual(25_000);
  }, 60_000);

  test.each([
    ['a file', ['head -c 3000000 /dev/zero > big', 'echo written', 'sleep 20']],
    // deleted but still open: invisible to a walk of the tree, still on the disk
    [
      'a deleted file held open',
      ['exec 3>big', 'rm big', 'head -c 3000000 /dev/zero >&3', 'echo written', 'sleep 600'],
    ],
    // each file or directory counts at least 4 KiB
    ['many empty files', ['mkdir many', 'cd many && seq 1 400 | xargs touch', 'echo written', 'sleep 600']],
    // measured once more when the step ends, however short
    ['a file written just before the end', ['head -c 3000000 /dev/zero > big', 'echo written']],
  ])(
    'when a step makes its workspace larger than the disk limit with %s, then it is stopped and its log says why',
    (_what, commands) =>
      agentLog.showing(async () => {
        const r = await pushWith(owner, { vcs: 'git' }, (w) =>
          fs.writeFile(path.join(w, '.pipeline.yml'), pipelineYaml([{ name: 'fill', commands }])),
        );
        const p = await withAgent(() => until(r, finished));
        // (an error's message shows in the failure, if it ends otherwise)
        expect([p.status, p.error_message ?? null]).toEqual(['failure', null]);
        const log = (await owner.client.get(`/api/v1/repos/${r.org}/${r.name}/pipelines/1/steps/1/log`)).text;
        expect(log).toMatch(
          /^written\n\n\[triad\] the workspace took \d+\.\d MiB, more than the limit of 1 MiB: step stopped\n$/,
        );
      }),
    60_000,
  );

  test(
    'when it runs past the pipeline time limit, then the agent stops it: the step fails and says so, later steps are skipped',
    () =>
      agentLog.showing(async () => {
        const r = await pushWith(owner, { vcs: 'git' }, (w) =>
          fs.writeFile(
            path.join(w, '.pipeline.yml'),
            pipelineYaml([
              // far past this test's time limit: only the pipeline limit (20 s) ends it
              { name: 'long', commands: ['echo started', 'sleep 600'] },
              { name: 'after', commands: ['echo never'] },
            ]),
          ),
        );
        const p = await withAgent(() => until(r, finished));
        expect([p.status, p.error_message]).toEqual([
          'failure',
          'the pipeline ran past its time limit of 20s: stopped',
        ]);
        expect(p.steps.map((x: any) => x.status)).toEqual(['failure', 'skipped']);
        const log = (await owner.client.get(`/api/v1/repos/${r.org}/${r.name}/pipelines/1/steps/1/log`)).text;
        expect(log).toBe('started\n\n[triad] the pipeline ran past its time limit of 20s: stopped\n');
      }),
    60_000,
  );

  test(
    'when the checkout itself is larger than the disk limit, then the pipeline is error before any step',
    () =>
      agentLog.showing(async () => {
        const r = await pushWith(owner, { vcs: 'git' }, async (w) => {
          await fs.writeFile(path.join(w, 'big.bin'), randomBytes(1536 * 1024));
          await fs.writeFile(path.join(w, '.pipeline.yml'), steps(1));
        });
        const p = await withAgent(() => until(r, finished));
        expect(p.status).toBe('error');
        expect(p.error_message).toMatch(
          /^cloning .+: the workspace took \d+\.\d MiB, more than the limit of 1 MiB: clone stopped$/,
        );
        expect(p.steps.map((x: any) => x.status)).toEqual(['skipped']);
      }),
    60_000,
  );
});

describe('claims', () => {
  test('when one organization queued several pipelines before another queued one, then they take turns', async () => {
    const [a, b] = [uniq('orga'), uniq('orgb')];
    for (const org of [a, b])
      expect((await owner.client.post('/api/v1/orgs', { name: org })).status).toBe(201);
    const queued: Pushed[] = [];
    for (const org of [a, a, a, b]) {
      queued.push(
        await pushWith(owner, { vcs: 'git', org }, (w) =>
          fs.writeFile(path.join(w, '.pipeline.yml'), steps(1)),
        ),
      );
    }
    const done = await withAgent(
      async () => {
        const out = [];
        for (const r of queued) out.push({ org: r.org, p: await until(r, finished) });
        return out;
      },
      { capacity: 1 },
    );
    const order = done
      .sort((x, y) => Date.parse(x.p.started_at) - Date.parse(y.p.started_at))
      .map((x) => (x.org === a ? 'A' : 'B'));
    expect(order).toEqual(['A', 'B', 'A', 'A']);
  }, 60_000);
});
