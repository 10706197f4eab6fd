/**
 * Per-step resources against the real API server: a step pod made by the kubernetes executor
 * carries the step's `resources` as requests and limits and the pool's ephemeral-storage request
 * (admitted under the restricted Pod Security profile and run on a kwok node); the AgentPool
 * schema takes `spec.steps.maxResources` as Kubernetes quantities and refuses anything else.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { V1Deployment } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { KubernetesExecutor } from '../../agent/executors/kubernetes.ts';
import { defaultPodSpecOptions } from '../../agent/executors/pod-spec.ts';
import { createPool, deletePool, getPool, installAgentPoolCrd } from './harness/operator.ts';
import { CHART, PodRecorder, helmOk, kubectlOk } from './harness/kube.ts';
import { stepWorld, testJob, testStep, type StepWorld } from './harness/step-world.ts';

let w: StepWorld;
let ns: string;
let pods: PodRecorder;

beforeAll(async () => {
  w = await stepWorld('stepres');
  ({ ns, pods } = w);
});

afterAll(async () => {
  await w?.close();
});

const job = testJob(7001, { clone_token: null });
const step = testStep({ resources: { cpu: '500m', memory: '256Mi' } });

describe('per-step resources on a real API server', () => {
  test("when a step asks for resources, then its pod's step container has them as requests and limits, plus ephemeral-storage", async () => {
    const ex = new KubernetesExecutor({
      kubeConfig: w.agentConfig(),
      pod: defaultPodSpecOptions({
        namespace: ns,
        instance: 'agent-r',
        cloneImage: 'triad:test',
        requests: { cpu: '100m', memory: '64Mi' },
        limits: { cpu: '1', memory: '128Mi' },
        ephemeralStorage: '1Gi',
      }),
      pendingTimeoutMs: 3000,
      pollMs: 200,
    });
    await ex.prepare(job, new AbortController().signal);
    try {
      const result = await ex.runStep({
        job,
        step,
        env: {},
        onOutput: () => undefined,
        signal: new AbortController().signal,
      });
      expect(result.exitCode).toBe(0);
      const name = pods.names().find((n) => n.startsWith(`triad-p${job.pipeline_id}-s1-`));
      expect(name).toBeDefined();
      const seen = pods.first(name!);
      expect(seen.spec?.containers.find((c) => c.name === 'step')?.resources).toEqual({
        requests: { cpu: '500m', memory: '256Mi', 'ephemeral-storage': '1Gi' },
        limits: { cpu: '500m', memory: '256Mi' },
      });
      expect(seen.spec?.initContainers?.find((c) => c.name === 'clone')?.resources).toEqual({
        requests: { cpu: '100m', memory: '64Mi' },
        limits: { cpu: '1', memory: '128Mi' },
      });
    } finally {
      await ex.cleanup(job);
    }
  });

  test('when an AgentPool sets steps.maxResources, then quantities (strings or integers) are kept and anything else is refused', async () => {
    await installAgentPoolCrd();
    const steps = { maxResources: { cpu: 2, memory: '4Gi' }, ephemeralStorage: '2Gi' };
    await createPool(ns, 'bounded', { image: 'triad:test', steps });
    expect((await getPool(ns, 'bounded')).spec.steps).toEqual(steps);
    const err = await createPool(ns, 'unbounded', {
      image: 'triad:test',
      steps: { maxResources: { memory: 'lots' } },
    }).catch((e: unknown) => e);
    expect(String(err?.body ?? err)).toMatch(/spec\.steps\.maxResources\.memory/);
    await deletePool(ns, 'bounded');
  });

  test('the chart: agent.steps.maxResources and ephemeralStorage reach the agents, server.scratch the server pod, and the API server takes both', async () => {
    const rendered = await helmOk([
      ...['template', 't', CHART, '-n', ns],
      ...[
        '--show-only',
        'templates/server-deployment.yaml',
        '--show-only',
        'templates/agent-deployment.yaml',
      ],
      ...['--set', 'agent.steps.maxResources.cpu=2', '--set-string', 'agent.steps.maxResources.memory=4Gi'],
      ...['--set', 'agent.steps.ephemeralStorage=1Gi', '--set', 'server.scratch.sizeLimit=5Gi'],
    ]);
    const docs = parseAllDocuments(rendered).map((d) => d.toJS() as V1Deployment);
    const server = docs.find((d) => d.metadata?.name === 't-triad')!.spec!.template.spec!;
    expect(server.containers[0]!.resources!.requests).toEqual({
      cpu: '100m',
      memory: '256Mi',
      'ephemeral-storage': '1Gi',
    });
    expect(server.volumes!.find((v) => v.name === 'tmp')!.emptyDir).toEqual({ sizeLimit: '5Gi' });
    const agent = docs.find((d) => d.metadata?.name === 't-triad-agent')!.spec!.template.spec!;
    const env = Object.fromEntries((agent.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      TRIAD_AGENT_MAX_CPU: '2',
      TRIAD_AGENT_MAX_MEMORY: '4Gi',
      TRIAD_AGENT_EPHEMERAL_STORAGE: '1Gi',
    });
    await kubectlOk(['apply', '--dry-run=server', '--validate=strict', '-n', ns, '-f', '-'], {
      input: rendered,
    });
  });
});
