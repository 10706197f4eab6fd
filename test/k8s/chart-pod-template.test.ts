/**
 * The chart's pod templates (agent.podTemplate, agent.steps.podTemplate) and the shape of
 * agent.steps.imagePullSecrets: rendered with `helm template`, the rendered objects accepted by
 * the real API server (server-side dry run, the AgentPool CRD's validations included), and values
 * reaching for what the chart or the executor owns refused with the reason.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { V1Deployment } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { CHART, cluster, deleteNamespace, helm, helmOk, kubectlOk, newNamespace } from './harness/kube.ts';
import { installAgentPoolCrd } from './harness/operator.ts';

let ns: string;
let values: string;

beforeAll(async () => {
  ns = await newNamespace('chart-tpl');
  await installAgentPoolCrd();
  values = path.join(cluster().dir, 'pod-template-values.yaml');
  fs.writeFileSync(
    values,
    `imagePullSecrets: [{name: top}]
agent:
  podTemplate:
    metadata:
      labels: {team: ci, app.kubernetes.io/component: other}
      annotations: {example.com/owner: platform}
    spec:
      priorityClassName: system-cluster-critical
      imagePullSecrets: [{name: agent-registry}]
      containers:
        - name: agent
          env: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
          volumeMounts: [{name: certs, mountPath: /etc/certs}]
      volumes: [{name: certs, configMap: {name: ca}}]
  steps:
    imagePullSecrets: [{name: reg-a}, reg-b]
    podTemplate:
      metadata: {annotations: {example.com/cost-center: ci}}
      spec: {runtimeClassName: gvisor}
`,
  );
});

afterAll(async () => {
  if (ns !== undefined) await deleteNamespace(ns);
});

async function render(args: string[], only: string): Promise<string> {
  return helmOk(['template', 't', CHART, '-n', ns, '-f', values, ...args, '--show-only', only]);
}

const docs = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS() as { kind: string; spec: any });

describe('chart pod templates', () => {
  test('when agent.podTemplate and agent.steps.podTemplate are set, then the agent Deployment carries them and the API server accepts it', async () => {
    const yaml = await render([], 'templates/agent-deployment.yaml');
    const d = docs(yaml)[0] as V1Deployment;
    const pod = d.spec!.template;
    // after the chart's fields, merged strategically; the selector labels stay the chart's
    expect(pod.metadata!.labels).toMatchObject({ team: 'ci', 'app.kubernetes.io/component': 'agent' });
    expect(pod.metadata!.annotations).toMatchObject({
      'example.com/owner': 'platform',
      'prometheus.io/scrape': 'true',
    });
    expect(pod.spec!.priorityClassName).toBe('system-cluster-critical');
    expect(pod.spec!.imagePullSecrets).toEqual([{ name: 'top' }, { name: 'agent-registry' }]);
    expect(pod.spec!.volumes!.map((v) => v.name)).toEqual(['tmp', 'certs']);
    const agent = pod.spec!.containers[0]!;
    expect(agent.args).toEqual(['agent']);
    expect(agent.volumeMounts!.map((m) => m.mountPath)).toEqual(['/tmp', '/etc/certs']);
    const env = Object.fromEntries(agent.env!.map((e) => [e.name, e.value]));
    expect(env.HTTPS_PROXY).toBe('http://proxy:3128');
    // step pull secrets as {name} objects (and plain names, the older shape)
    expect(env.TRIAD_AGENT_IMAGE_PULL_SECRETS).toBe('reg-a,reg-b');
    expect(JSON.parse(env.TRIAD_AGENT_STEP_TEMPLATE!)).toEqual({
      metadata: { annotations: { 'example.com/cost-center': 'ci' } },
      spec: { runtimeClassName: 'gvisor' },
    });
    await kubectlOk(['apply', '--dry-run=server', '--validate=strict', '-n', ns, '-f', '-'], { input: yaml });
  });

  test('when agent.mode=operator, then the AgentPool gets them as spec.template and spec.stepTemplate (pull secrets included) and the CRD accepts it', async () => {
    const yaml = await render(
      ['--set', 'agent.mode=operator', '--set', 'secrets.adminToken=x'],
      'templates/operator.yaml',
    );
    const pool = docs(yaml).find((d) => d.kind === 'AgentPool')!;
    expect(pool.spec.template.spec.imagePullSecrets).toEqual([{ name: 'top' }, { name: 'agent-registry' }]);
    expect(pool.spec.stepTemplate).toEqual({
      metadata: { annotations: { 'example.com/cost-center': 'ci' } },
      spec: { runtimeClassName: 'gvisor', imagePullSecrets: [{ name: 'reg-a' }, { name: 'reg-b' }] },
    });
    const poolYaml = yaml.split(/^---$/m).find((d) => /kind: AgentPool/.test(d))!;
    await kubectlOk(['apply', '--dry-run=server', '--validate=strict', '-n', ns, '-f', '-'], {
      input: poolYaml,
    });
  });

  test('when a pod template reaches for what the chart or the executor owns, then helm refuses and says why', async () => {
    const refused = async (set: string) => {
      const r = await helm(['template', 't', CHART, '--set', set]);
      expect(r.code).not.toBe(0);
      return r.stderr;
    };
    expect(
      await refused(
        'agent.steps.podTemplate.spec.containers[0].name=step,agent.steps.podTemplate.spec.containers[0].command[0]=sh',
      ),
    ).toContain(
      "agent.steps.podTemplate.spec cannot set the step container's image, command, args or workingDir: the executor runs the pipeline's step",
    );
    expect(await refused('agent.steps.podTemplate.spec.restartPolicy=Always')).toContain(
      'agent.steps.podTemplate.spec cannot set restartPolicy: the executor runs each step once (Never)',
    );
    expect(
      await refused(
        'agent.podTemplate.spec.containers[0].name=agent,agent.podTemplate.spec.containers[0].env[0].name=TRIAD_AGENT_TOKEN',
      ),
    ).toContain('agent.podTemplate.spec cannot set TRIAD_AGENT_TOKEN in the agent container');
    expect(await refused('agent.podTemplate.metadata.name=x')).toContain(
      "additional properties 'name' not allowed",
    );
  });
});
