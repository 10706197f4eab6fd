import { describe, expect, test } from '@jest/globals';
import { pino } from 'pino';
import { Agent } from '../../agent/agent.ts';
import { LocalExecutor } from '../../agent/executors/local.ts';
import { runAgent } from '../../agent/main.ts';
import { commitFiles, gitRepo, newAgent, type GitRepo } from '../helpers/ci.ts';
import { withOrgServer } from '../helpers/factories.ts';
import type { TestServer, TestUser } from '../helpers/server.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const quiet = pino({ level: process.env.TRIAD_TEST_AGENT_LOG ?? 'silent' });

/** A real agent with the local executor whose pool allows at most `maxResources` per step. */
async function withAgent(maxResources: { cpu?: string; memory?: string }, fn: () => Promise<void>) {
  const token = (await s.admin.post('/api/v1/admin/agents', { name: 'resources-agent' })).body.data.token;
  const agent = new Agent({
    server: s.url,
    token,
    instance: 'jest-resources',
    capacity: 1,
    executor: new LocalExecutor(),
    log: quiet,
    pollWait: 1,
    cancelCheckMs: 500,
    maxResources,
  });
  await agent.start();
  try {
    await fn();
  } finally {
    await agent.stop();
  }
}

async function pushed(file: string): Promise<GitRepo> {
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': file });
  await repo.push();
  return repo;
}

async function finished(repo: GitRepo): Promise<any> {
  const until = Date.now() + 30_000;
  for (;;) {
    const p = (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`)).body;
    if (['success', 'failure', 'cancelled', 'error'].includes(p.status) || Date.now() > until) return p;
    await new Promise((r) => setTimeout(r, 150));
  }
}

const log = async (repo: GitRepo, step: number) =>
  (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1/steps/${step}/log`)).text;

describe('per-step resources with the real agent', () => {
  test('when a step asks for more memory than the pool allows, then it fails at claim saying both and nothing runs', async () => {
    await withAgent({ cpu: '2', memory: '1Gi' }, async () => {
      const repo = await pushed(
        [
          'steps:',
          '  - {name: setup, image: alpine, commands: ["echo setup ran"]}',
          '  - name: build',
          '    image: alpine',
          '    commands: ["echo build ran"]',
          '    resources: {cpu: 500m, memory: 2Gi}',
          '  - {name: after, image: alpine, commands: ["echo after ran"]}',
          '',
        ].join('\n'),
      );
      const p = await finished(repo);
      expect(p.status).toBe('failure');
      expect(p.steps.map((x: any) => [x.name, x.status])).toEqual([
        ['setup', 'skipped'],
        ['build', 'failure'],
        ['after', 'skipped'],
      ]);
      expect(await log(repo, 2)).toBe(
        "[triad] step build asks for memory 2Gi, above this pool's maximum 1Gi (spec.steps.maxResources): not run\n",
      );
      // the step before it never started: no start time, no log
      expect(p.steps[0].started_at).toBeNull();
      expect(await log(repo, 1)).toContain('log not found');
    });
  });

  test("when a step's resources fit, then it runs with its memory as the sandbox's address-space limit", async () => {
    await withAgent({ memory: '1Gi' }, async () => {
      const repo = await pushed(
        [
          'steps:',
          '  - {name: small, image: alpine, commands: ["ulimit -v"], resources: {memory: 768Mi}}',
          '  - {name: plain, image: alpine, commands: ["ulimit -v"]}',
          '',
        ].join('\n'),
      );
      const p = await finished(repo);
      expect(p.steps.map((x: any) => [x.name, x.status])).toEqual([
        ['small', 'success'],
        ['plain', 'success'],
      ]);
      expect(await log(repo, 1)).toBe(`${768 * 1024}\n`); // KiB
      expect(await log(repo, 2)).toBe(`${4 * 1024 * 1024}\n`); // TRIAD_AGENT_SANDBOX_MEMORY's default, 4Gi
    });
  });

  test('the job carries the resources a step asks for, and none for a step asking for none', async () => {
    const agent = await newAgent(s);
    await pushed(
      'steps:\n  - {name: a, image: alpine, commands: [x], resources: {cpu: 1, memory: 512Mi}}\n  - {name: b, image: alpine, commands: [y]}\n',
    );
    const r = await agent.post('/api/v1/ci/poll');
    expect(r.status).toBe(200);
    const job = r.body;
    expect(job.steps[0].resources).toEqual({ cpu: '1', memory: '512Mi' });
    expect(job.steps[1]).not.toHaveProperty('resources');
  });

  test('an agent whose maximum is not a quantity refuses to start, naming the variable', async () => {
    await expect(runAgent({ TRIAD_AGENT_TOKEN: 't', TRIAD_AGENT_MAX_MEMORY: '4GB' })).rejects.toThrow(
      'invalid agent configuration: TRIAD_AGENT_MAX_MEMORY: must be a Kubernetes quantity such as 512Mi or 2Gi',
    );
    await expect(runAgent({ TRIAD_AGENT_TOKEN: 't', TRIAD_AGENT_MAX_CPU: '0' })).rejects.toThrow(
      'TRIAD_AGENT_MAX_CPU: must be at least 1m',
    );
  });
});
