/**
 * The whole path once: a Triad server on loopback, the real `triad agent` process with the
 * kubernetes executor (as the chart's agent service account), a `git push` of a two-step
 * `.pipeline.yml`, step pods on kwok nodes, and the statuses and logs through the API.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { commitFiles, gitRepo } from '../helpers/ci.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { PodRecorder, ROOT, cluster, objectsIn, waitFor } from './harness/kube.ts';
import { stepWorld, type StepWorld } from './harness/step-world.ts';

let s: TestServer;
let w: StepWorld;
let ns: string;
let pods: PodRecorder;

beforeAll(async () => {
  s = await startTestServer();
  w = await stepWorld('pipeline');
  ({ ns, pods } = w);
});

afterAll(async () => {
  await s?.close();
  await w?.close();
});

const PIPELINE = `steps:
  - name: hello
    image: alpine:3.20
    commands: ["echo hello"]
  - name: fails
    image: alpine:3.20
    commands: ["exit 3"]
    environment: {KWOK_EXIT_CODE: "3"}
`;

describe('a pushed pipeline on the control plane', () => {
  test('when a two-step pipeline is pushed, then its steps run as pods on kwok nodes and the API reports statuses, exit codes and logs', async () => {
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    const agentReg = await s.admin.post('/api/v1/admin/agents', { name: 'k8s-agent' });
    expect(agentReg.status).toBe(201);
    const kubeconfig = w.kubeconfig;

    const agent = spawn(process.execPath, [path.join(ROOT, 'src', 'cli.ts'), 'agent'], {
      cwd: ROOT,
      env: {
        ...process.env,
        TRIAD_AGENT_SERVER: s.url,
        TRIAD_AGENT_TOKEN: agentReg.body.data.token,
        TRIAD_AGENT_EXECUTOR: 'kubernetes',
        TRIAD_AGENT_INSTANCE: 'k8s-agent-0',
        TRIAD_AGENT_NAMESPACE: ns,
        TRIAD_AGENT_CLONE_IMAGE: 'triad:test',
        TRIAD_AGENT_PENDING_TIMEOUT: '60',
        TRIAD_AGENT_POLL_WAIT: '2',
        TRIAD_AGENT_METRICS_PORT: 'off',
        KUBECONFIG: kubeconfig,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let agentLog = '';
    agent.stdout.on('data', (d: Buffer) => (agentLog += d.toString()));
    agent.stderr.on('data', (d: Buffer) => (agentLog += d.toString()));
    const exited = new Promise<number | null>((resolve) => agent.on('exit', (code) => resolve(code)));

    try {
      const repo = await gitRepo(s, owner, org);
      const sha = await commitFiles(repo, { '.pipeline.yml': PIPELINE }, 'ci on kubernetes');
      await repo.push();
      const api = `/api/v1/repos/${org}/${repo.name}/pipelines/1`;
      const p = await waitFor(
        'the pipeline to finish',
        async () => {
          const r = await s.anon.get(api);
          return r.status === 200 && !['pending', 'running'].includes(r.body.status) ? r.body : undefined;
        },
        120_000,
        500,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\nagent log:\n${agentLog}`);
      });

      expect(p).toMatchObject({ number: 1, commit_node: sha, status: 'failure' });
      expect(p.steps.map((x: any) => [x.name, x.status, x.exit_code])).toEqual([
        ['hello', 'success', 0],
        ['fails', 'failure', 3],
      ]);
      for (const n of [1, 2]) {
        const log = await owner.client.get(`${api}/steps/${n}/log`);
        expect(log.status).toBe(200);
        expect(log.text).toBe(`${cluster().stepLogLine}\n`);
      }

      // one pod per step, each with the step's image, scheduled on a fake node
      const names = pods.names();
      expect(names).toHaveLength(2);
      expect(names.map((n) => n.replace(/-[0-9a-f]+$/, ''))).toEqual([
        `triad-p${p.id}-s1`,
        `triad-p${p.id}-s2`,
      ]);
      for (const n of names) {
        const first = pods.first(n);
        expect(first.spec?.containers[0]?.image).toBe('alpine:3.20');
        expect(first.metadata?.labels?.['triad.dev/agent']).toBe('k8s-agent-0');
        expect(pods.some(n, (x) => cluster().nodes.includes(x.spec?.nodeName ?? ''))).toBe(true);
      }
      expect(pods.first(names[1]!).spec?.containers[0]?.command).toEqual(['sh', '-c', 'set -e\nexit 3']);

      // nothing left behind: step pods and the workspace claim are deleted
      await waitFor(
        'no step pods or claims',
        async () =>
          (await objectsIn(ns, 'pods,persistentvolumeclaims', 'app.kubernetes.io/managed-by=triad-agent'))
            .length === 0,
      );
    } finally {
      agent.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
