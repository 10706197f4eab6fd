/**
 * Pod templates against the real API server: an AgentPool's `spec.stepTemplate` kept by the CRD,
 * handed to the kubernetes executor the way the operator does (TRIAD_AGENT_STEP_TEMPLATE), and
 * the step pods it makes on kwok nodes; the CRD's validations refusing what the executor and the
 * operator own; the agents' Deployment with `spec.template` accepted by the API server.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { KubernetesExecutor } from '../../agent/executors/kubernetes.ts';
import { parseKubernetesEnv } from '../../agent/executors/kubernetes-env.ts';
import { deployment } from '../../src/operator/resources.ts';
import type { AgentPool } from '../../src/operator/types.ts';
import { PodRecorder, clients, kubectlOk } from './harness/kube.ts';
import { stepWorld, testJob, testStep, type StepWorld } from './harness/step-world.ts';
import { createPool, getPool, installAgentPoolCrd } from './harness/operator.ts';

const RUNTIME_CLASS = 'triad-test-sandboxed';
let w: StepWorld;
let ns: string;
let pods: PodRecorder;

beforeAll(async () => {
  w = await stepWorld('podtpl');
  ns = w.ns;
  pods = w.pods;
  // The RuntimeClass admission plugin refuses pods naming a RuntimeClass that does not exist.
  await kubectlOk(['apply', '-f', '-'], {
    input: `{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "${RUNTIME_CLASS}"}, "handler": "runsc"}`,
  });
  await installAgentPoolCrd();
});

afterAll(async () => {
  await w?.close();
});

const job = testJob(7001);
const step = testStep();

const stepTemplate = {
  metadata: { labels: { team: 'web' }, annotations: { 'example.com/cost-center': 'ci-42' } },
  spec: {
    runtimeClassName: RUNTIME_CLASS,
    tolerations: [{ key: 'example.com/ci', operator: 'Exists', effect: 'NoSchedule' }],
    imagePullSecrets: [{ name: 'registry-creds' }],
    volumes: [{ name: 'cache', emptyDir: {} }],
    containers: [{ name: 'step', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }],
  },
};

const refusal = async (name: string, spec: Record<string, unknown>): Promise<string> => {
  try {
    await createPool(ns, name, { image: 'triad:test', ...spec });
  } catch (err) {
    return String((err as { body?: unknown }).body ?? err);
  }
  throw new Error(`pool ${name} was accepted`);
};

describe('pod templates on a real API server', () => {
  test('when a pool has a step template, then the step pods carry its annotations, runtime class, tolerations and pull secrets', async () => {
    await createPool(ns, 'shaped', {
      image: 'triad:test',
      stepTemplate,
      template: {
        metadata: { annotations: { 'example.com/owner': 'platform' } },
        spec: {
          imagePullSecrets: [{ name: 'registry-creds' }],
          containers: [{ name: 'agent', env: [{ name: 'HTTPS_PROXY', value: 'http://proxy:3128' }] }],
        },
      },
    });
    const pool = (await getPool(ns, 'shaped')) as AgentPool;
    // the CRD keeps every field of the patch (nothing pruned)
    expect(pool.spec.stepTemplate).toEqual(stepTemplate);

    // the agents' Deployment the operator would apply for it is valid for the API server
    const { apps } = clients();
    const d = deployment(pool, 1, 'http://triad:3000');
    const made = await apps.createNamespacedDeployment({ namespace: ns, body: d, dryRun: 'All' });
    const agentPod = made.spec!.template;
    expect(agentPod.metadata?.annotations).toEqual({ 'example.com/owner': 'platform' });
    expect(agentPod.spec?.imagePullSecrets).toEqual([{ name: 'registry-creds' }]);
    const agentEnv = agentPod.spec!.containers[0]!.env!;
    expect(agentEnv).toContainEqual({ name: 'HTTPS_PROXY', value: 'http://proxy:3128' });
    const passed = agentEnv.find((e) => e.name === 'TRIAD_AGENT_STEP_TEMPLATE')!.value!;

    // an agent configured the way that Deployment configures it runs a step
    const { options } = parseKubernetesEnv({ TRIAD_AGENT_NAMESPACE: ns, TRIAD_AGENT_STEP_TEMPLATE: passed });
    const ex = new KubernetesExecutor({
      ...options,
      pod: { ...options.pod, instance: 'agent-t', cloneImage: 'triad:test' },
      kubeConfig: w.agentConfig(),
      pendingTimeoutMs: 5000,
      pollMs: 200,
    });
    await ex.prepare(job, new AbortController().signal);
    const result = await ex.runStep({
      job,
      step,
      env: { ...job.ci_env },
      onOutput: () => undefined,
      signal: new AbortController().signal,
    });
    await ex.cleanup(job);
    expect(result).toEqual({ exitCode: 0 });

    const name = pods.names().find((n) => n.startsWith(`triad-p${job.pipeline_id}-s1-`))!;
    const pod = pods.first(name);
    expect(pod.metadata?.labels).toMatchObject({
      team: 'web',
      'triad.dev/pipeline': String(job.pipeline_id),
    });
    expect(pod.metadata?.annotations).toMatchObject({ 'example.com/cost-center': 'ci-42' });
    expect(pod.spec?.runtimeClassName).toBe(RUNTIME_CLASS);
    expect(pod.spec?.tolerations).toEqual(expect.arrayContaining(stepTemplate.spec.tolerations));
    expect(pod.spec?.imagePullSecrets).toEqual([{ name: 'registry-creds' }]);
    expect(pod.spec?.volumes?.map((v) => v.name)).toEqual(['workspace', 'cache']);
    expect(pod.spec?.containers[0]?.volumeMounts?.map((m) => m.mountPath)).toEqual(['/workspace', '/cache']);
    expect(pod.spec?.containers[0]?.command).toEqual(['sh', '-c', 'set -e\necho hello']);
    expect(pods.some(name, (p) => p.status?.phase === 'Succeeded')).toBe(true);
  });

  test('when a pool template overrides what the executor or the operator owns, then the API server refuses it and says why', async () => {
    expect(
      await refusal('cmd', {
        stepTemplate: { spec: { containers: [{ name: 'step', command: ['sh', '-c', 'x'] }] } },
      }),
    ).toContain(
      "stepTemplate cannot set the step container's command or args: the executor runs the pipeline's commands",
    );
    expect(await refusal('restart', { stepTemplate: { spec: { restartPolicy: 'Always' } } })).toContain(
      'stepTemplate cannot set restartPolicy: the executor runs each step once (Never)',
    );
    expect(
      await refusal('clone', { stepTemplate: { spec: { initContainers: [{ name: 'clone', image: 'x' }] } } }),
    ).toContain('stepTemplate cannot change the clone init container');
    expect(
      await refusal('ws', { stepTemplate: { spec: { volumes: [{ name: 'workspace', emptyDir: {} }] } } }),
    ).toContain('stepTemplate cannot change the workspace volume');
    expect(
      await refusal('label', { stepTemplate: { metadata: { labels: { 'triad.dev/pipeline': '1' } } } }),
    ).toContain('stepTemplate cannot set the app.kubernetes.io/managed-by or triad.dev/* labels');
    expect(
      await refusal('agentimg', { template: { spec: { containers: [{ name: 'agent', image: 'evil' }] } } }),
    ).toContain("template cannot set the agent container's image");
    expect(
      await refusal('agentenv', {
        template: {
          spec: { containers: [{ name: 'agent', env: [{ name: 'TRIAD_AGENT_TOKEN', value: 'x' }] }] },
        },
      }),
    ).toContain('template cannot set TRIAD_*, POD_NAME or POD_NAMESPACE in the agent container');
    expect(await refusal('agentsa', { template: { spec: { serviceAccountName: 'admin' } } })).toContain(
      'template cannot set serviceAccountName',
    );
  });
});
