/**
 * The operator issue's acceptance path on the real control plane: an AgentPool with
 * `minReplicas: 0`, a pushed pipeline, a replica requested, the pipeline's steps run as pods, and
 * the pool back at 0 after the delay, with `kubectl get agentpools` showing it. Kwok nodes run no
 * containers, so the agent pod's process is run here: a real `triad agent` with the pool's token,
 * labels and service account, named like the agent pod, whose step pods kwok then "runs".
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { commitFiles, gitRepo } from '../helpers/ci.ts';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import {
  PodRecorder,
  ROOT,
  deleteNamespace,
  kubectl,
  kubectlOk,
  newNamespace,
  serviceAccountKubeconfig,
  waitFor,
} from './harness/kube.ts';
import {
  condition,
  createPool,
  deploymentReplicas,
  installAgentPoolCrd,
  operatorRbac,
  removePools,
  poolToken,
  agentPods,
  startOperator,
  waitForPool,
  type OperatorProcess,
} from './harness/operator.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
let ns: string;
let op: OperatorProcess;
beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  org = await s.newOrg(owner);
  ns = await newNamespace('operator-acc');
  await installAgentPoolCrd();
  op = startOperator({
    server: s.url,
    token: s.adminToken,
    namespace: ns,
    kubeconfig: await operatorRbac(ns),
  });
});

afterAll(async () => {
  if (ns !== undefined) await removePools(ns);
  await op?.kill();
  await s?.close();
  if (ns !== undefined) {
    await kubectl([
      'delete',
      'clusterrole,clusterrolebinding',
      `t-triad-operator-${ns}`,
      '--ignore-not-found',
    ]);
    await deleteNamespace(ns);
  }
});

const failWithLog = (err: unknown) => {
  throw new Error(`${String(err)}\noperator log:\n${op.log().slice(-6000)}`);
};

const labelled = (pool: string) => `labels: {pool: ${pool}}
steps:
  - name: hello
    image: alpine:3.20
    commands: ["echo hello"]
  - name: world
    image: alpine:3.20
    commands: ["echo world"]
`;

async function pushPipeline(file: string): Promise<string> {
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': file });
  await repo.push();
  return `/api/v1/repos/${org}/${repo.name}/pipelines/1`;
}

describe('AgentPool operator acceptance', () => {
  test('acceptance: a pool at 0 gets a replica for a pushed pipeline, its steps run as pods, it returns to 0, and kubectl shows it throughout', async () => {
    await createPool(ns, 'acc', {
      image: 'triad:test',
      minReplicas: 0,
      maxReplicas: 2,
      capacity: 1,
      scaleDownDelaySeconds: 3,
      labels: { pool: 'acc' },
      steps: { pendingTimeoutSeconds: 60 },
    });
    await waitForPool(
      ns,
      'acc',
      'scaled to zero',
      (p) => condition(p, 'Ready')?.reason === 'ScaledToZero',
    ).catch(failWithLog);
    const table = await kubectlOk(['get', 'agentpools', '-n', ns]);
    expect(table.split('\n')[0]).toMatch(
      /NAME\s+MIN\s+MAX\s+DESIRED\s+REPLICAS\s+READY\s+PENDING\s+RUNNING\s+STATUS\s+AGE/,
    );
    expect(table).toMatch(/acc\s+0\s+2\s+0\s+0\s+0\s+0\s+0\s+ScaledToZero/);

    const steps = await PodRecorder.start(ns);
    const api = await pushPipeline(labelled('acc'));
    await waitFor('1 replica', async () => (await deploymentReplicas(ns, 'acc')) === 1).catch(failWithLog);
    const [pod] = await waitFor('the agent pod', async () => {
      const p = await agentPods(ns, 'acc');
      return p.length === 1 ? p : undefined;
    });
    expect(await kubectlOk(['get', 'agentpools', 'acc', '-n', ns])).toMatch(
      /acc\s+0\s+2\s+1\s+\d\s+\d\s+1\s+0\s+/,
    );

    // the agent pod's process, run here with the pool's service account and token
    const agent = spawn(process.execPath, [path.join(ROOT, 'src', 'cli.ts'), 'agent'], {
      cwd: ROOT,
      env: {
        ...process.env,
        TRIAD_AGENT_SERVER: s.url,
        TRIAD_AGENT_TOKEN: (await poolToken(ns, 'acc')).token,
        TRIAD_AGENT_LABELS: 'pool=acc',
        TRIAD_AGENT_EXECUTOR: 'kubernetes',
        TRIAD_AGENT_INSTANCE: pod!,
        TRIAD_AGENT_NAMESPACE: ns,
        TRIAD_AGENT_CLONE_IMAGE: 'triad:test',
        TRIAD_AGENT_PENDING_TIMEOUT: '60',
        TRIAD_AGENT_POLL_WAIT: '2',
        TRIAD_AGENT_METRICS_PORT: 'off',
        KUBECONFIG: await serviceAccountKubeconfig(ns, 'acc-agent'),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let agentLog = '';
    agent.stdout.on('data', (d: Buffer) => (agentLog += d.toString()));
    agent.stderr.on('data', (d: Buffer) => (agentLog += d.toString()));
    const exited = new Promise<number | null>((resolve) => agent.on('exit', (code) => resolve(code)));
    try {
      const p = await waitFor(
        'the pipeline to finish',
        async () => {
          const r = await owner.client.get(api);
          return ['pending', 'running'].includes(r.body.status) ? undefined : r.body;
        },
        120_000,
        500,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\nagent log:\n${agentLog}`);
      });
      expect(p.status).toBe('success');
      const stepPods = steps.names().filter((n) => n.startsWith('triad-p'));
      expect(stepPods.map((n) => n.replace(/-[0-9a-f]+$/, ''))).toEqual([
        `triad-p${p.id}-s1`,
        `triad-p${p.id}-s2`,
      ]);
      expect(steps.first(stepPods[0]!).metadata?.labels?.['triad.dev/agent']).toBe(pod);
      const back = await waitForPool(
        ns,
        'acc',
        'back to zero',
        (x) => x.status?.desiredReplicas === 0 && x.status?.replicas === 0,
      );
      expect(condition(back, 'Ready')).toMatchObject({ status: 'True', reason: 'ScaledToZero' });
    } finally {
      steps.stop();
      agent.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
