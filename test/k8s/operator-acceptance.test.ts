/**
 * The operator issue's acceptance path on the real control plane: an AgentPool with
 * `minReplicas: 0`, a pushed pipeline, a replica requested, the pipeline's steps run as pods, and
 * the pool back at 0 after the delay, with `kubectl get agentpools` showing it. Kwok nodes run no
 * containers, so the agent pod's process is run here: a real `triad agent` with the pool's token,
 * labels and service account, named like the agent pod, whose step pods kwok then "runs".
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { PodRecorder, ROOT, kubectlOk, serviceAccountKubeconfig, waitFor } from './harness/kube.ts';
import { labelled, operatorWorld } from './harness/operator-world.ts';
import {
  condition,
  createPool,
  deploymentReplicas,
  poolToken,
  agentPods,
  waitForPool,
} from './harness/operator.ts';

const w = operatorWorld('operator-acc');

describe('AgentPool operator acceptance', () => {
  test('acceptance: a pool at 0 gets a replica for a pushed pipeline, its steps run as pods, it returns to 0, and kubectl shows it throughout', async () => {
    await createPool(w.ns, 'acc', {
      image: 'triad:test',
      minReplicas: 0,
      maxReplicas: 2,
      capacity: 1,
      scaleDownDelaySeconds: 3,
      labels: { pool: 'acc' },
      steps: { pendingTimeoutSeconds: 60 },
    });
    await waitForPool(
      w.ns,
      'acc',
      'scaled to zero',
      (p) => condition(p, 'Ready')?.reason === 'ScaledToZero',
    ).catch(w.failWithLog);
    const table = await kubectlOk(['get', 'agentpools', '-n', w.ns]);
    expect(table.split('\n')[0]).toMatch(
      /NAME\s+MIN\s+MAX\s+DESIRED\s+REPLICAS\s+READY\s+PENDING\s+RUNNING\s+STATUS\s+AGE/,
    );
    expect(table).toMatch(/acc\s+0\s+2\s+0\s+0\s+0\s+0\s+0\s+ScaledToZero/);

    const steps = await PodRecorder.start(w.ns);
    const api = await w.pushPipeline(labelled('acc'));
    await waitFor('1 replica', async () => (await deploymentReplicas(w.ns, 'acc')) === 1).catch(
      w.failWithLog,
    );
    const [pod] = await waitFor('the agent pod', async () => {
      const p = await agentPods(w.ns, 'acc');
      return p.length === 1 ? p : undefined;
    });
    expect(await kubectlOk(['get', 'agentpools', 'acc', '-n', w.ns])).toMatch(
      /acc\s+0\s+2\s+1\s+\d\s+\d\s+1\s+0\s+/,
    );

    // the agent pod's process, run here with the pool's service account and token
    const agent = spawn(process.execPath, [path.join(ROOT, 'src', 'cli.ts'), 'agent'], {
      cwd: ROOT,
      env: {
        ...process.env,
        TRIAD_AGENT_SERVER: w.s.url,
        TRIAD_AGENT_TOKEN: (await poolToken(w.ns, 'acc')).token,
        TRIAD_AGENT_LABELS: 'pool=acc',
        TRIAD_AGENT_EXECUTOR: 'kubernetes',
        TRIAD_AGENT_INSTANCE: pod!,
        TRIAD_AGENT_NAMESPACE: w.ns,
        TRIAD_AGENT_CLONE_IMAGE: 'triad:test',
        TRIAD_AGENT_PENDING_TIMEOUT: '60',
        TRIAD_AGENT_POLL_WAIT: '2',
        TRIAD_AGENT_METRICS_PORT: 'off',
        KUBECONFIG: await serviceAccountKubeconfig(w.ns, 'acc-agent'),
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
          const r = await w.owner.client.get(api);
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
        w.ns,
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
