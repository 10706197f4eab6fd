import { describe, expect, test } from '@jest/globals';
import { deployment } from '../../src/operator/resources.ts';
import { specProblem, type AgentPool, type AgentPoolSpec } from '../../src/operator/types.ts';

const pool = (spec: Partial<AgentPoolSpec>): AgentPool => ({
  apiVersion: 'triad.dev/v1alpha1',
  kind: 'AgentPool',
  metadata: { name: 'builders', namespace: 'ci', uid: 'uid-1' },
  spec: { image: 'triad:1', podLabels: { team: 'a' }, ...spec },
});

const podOf = (p: AgentPool) => deployment(p, 1, 'http://triad:3000').spec!.template;
const envOf = (p: AgentPool) =>
  Object.fromEntries((podOf(p).spec!.containers[0]!.env ?? []).map((e) => [e.name, e.value]));

describe('AgentPool spec.template and spec.stepTemplate in the agents Deployment', () => {
  test('when a pool has a template, then the agent pods carry it after the pool fields', () => {
    const p = pool({
      template: {
        metadata: { labels: { team: 'b' }, annotations: { 'example.com/owner': 'ci' } },
        spec: {
          priorityClassName: 'agents',
          imagePullSecrets: [{ name: 'registry' }],
          containers: [{ name: 'agent', env: [{ name: 'HTTPS_PROXY', value: 'http://proxy:3128' }] }],
        },
      },
    });
    const t = podOf(p);
    expect(t.metadata!.labels).toMatchObject({ team: 'b', 'triad.dev/agent-pool': 'builders' });
    expect(t.metadata!.annotations).toEqual({ 'example.com/owner': 'ci' });
    expect(t.spec!.priorityClassName).toBe('agents');
    expect(t.spec!.imagePullSecrets).toEqual([{ name: 'registry' }]);
    expect(envOf(p)).toMatchObject({ HTTPS_PROXY: 'http://proxy:3128', TRIAD_AGENT_EXECUTOR: 'kubernetes' });
    expect(t.spec!.containers[0]!.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
  });

  test('when a template reaches for what the operator owns, then the operator still wins and the spec is refused', () => {
    const template = {
      metadata: { labels: { 'triad.dev/agent-pool': 'other' } },
      spec: {
        serviceAccountName: 'admin',
        containers: [
          { name: 'agent', args: ['server'], env: [{ name: 'TRIAD_AGENT_CAPACITY', value: '99' }] },
        ],
      },
    };
    const p = pool({ template });
    const t = podOf(p);
    expect(t.metadata!.labels!['triad.dev/agent-pool']).toBe('builders');
    expect(t.spec!.serviceAccountName).toBe('builders-agent');
    expect(t.spec!.containers[0]!.args).toEqual(['agent']);
    expect(envOf(p).TRIAD_AGENT_CAPACITY).toBe('2');
    expect(specProblem(p)).toBe(
      'template: cannot set serviceAccountName: the operator binds the agents to their own service account',
    );
    expect(specProblem(pool({ template: { spec: { containers: [{ name: 'agent', image: 'x' }] } } }))).toBe(
      "template: cannot set the agent container's image: the operator runs `triad agent` from spec.image",
    );
  });

  test('when a pool has a step template, then the agents get it as TRIAD_AGENT_STEP_TEMPLATE', () => {
    const stepTemplate = { spec: { runtimeClassName: 'gvisor' } };
    expect(JSON.parse(envOf(pool({ stepTemplate })).TRIAD_AGENT_STEP_TEMPLATE!)).toEqual(stepTemplate);
    expect(envOf(pool({})).TRIAD_AGENT_STEP_TEMPLATE).toBeUndefined();
    expect(specProblem(pool({ stepTemplate: { spec: { restartPolicy: 'Always' } } }))).toBe(
      'stepTemplate: spec cannot set restartPolicy: the executor runs each step once (Never)',
    );
  });
});
