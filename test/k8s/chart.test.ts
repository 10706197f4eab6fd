/**
 * The Helm chart against the real API server: installed with the default values and with every
 * optional block on (charts/triad/ci/all-on-values.yaml) into namespaces that enforce the
 * restricted Pod Security profile, upgraded, uninstalled; and its rendered output applied with
 * `kubectl apply --validate=strict` from another current namespace. Its pods "run" on kwok nodes,
 * so `helm --wait` sees Deployments become available and the migration hook Job complete.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  CHART,
  clients,
  cluster,
  deleteNamespace,
  helm,
  helmOk,
  kubectl,
  kubectlOk,
  newNamespace,
  testCredentials,
} from './harness/kube.ts';
import { everythingIn, installCrds, waitUntilOnly } from './harness/objects.ts';

const ALL_ON = path.join(CHART, 'ci', 'all-on-values.yaml');
const made: string[] = [];

beforeAll(async () => {
  await installCrds();
});
afterAll(async () => {
  for (const n of made) await deleteNamespace(n);
});

async function namespace(prefix: string): Promise<string> {
  const n = await newNamespace(prefix);
  made.push(n);
  return n;
}

function expectAdmitted(out: { stderr: string; stdout: string }) {
  // PodSecurity's warn mode prints "would violate PodSecurity" for every offending pod template
  expect(`${out.stderr}\n${out.stdout}`).not.toMatch(/PodSecurity|violate/i);
}

async function secretToken(ns: string, name: string): Promise<string> {
  const s = await clients().core.readNamespacedSecret({ name, namespace: ns });
  return Buffer.from(s.data?.['agent-token'] ?? '', 'base64').toString();
}

/** Pods of a release, as `component@node phase`. */
async function releasePods(ns: string, release: string): Promise<string[]> {
  const pods = await clients().core.listNamespacedPod({
    namespace: ns,
    labelSelector: `app.kubernetes.io/instance=${release}`,
  });
  return pods.items
    .filter((p) => p.metadata?.deletionTimestamp === undefined)
    .map(
      (p) =>
        `${p.metadata?.labels?.['app.kubernetes.io/component']}@${cluster().nodes.includes(p.spec?.nodeName ?? '') ? 'kwok' : p.spec?.nodeName} ${p.status?.phase}`,
    )
    .sort();
}

async function envOf(ns: string, deployment: string): Promise<Record<string, string | undefined>> {
  const d = await clients().apps.readNamespacedDeployment({ name: deployment, namespace: ns });
  return Object.fromEntries((d.spec?.template.spec?.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
}

async function strategyOf(ns: string, deployment: string): Promise<string | undefined> {
  const d = await clients().apps.readNamespacedDeployment({ name: deployment, namespace: ns });
  return d.spec?.strategy?.type;
}

async function jobEvents(ns: string, job: string): Promise<string[]> {
  const ev = await clients().core.listNamespacedEvent({
    namespace: ns,
    fieldSelector: `involvedObject.kind=Job,involvedObject.name=${job}`,
  });
  return ev.items.map((e) => e.reason ?? '');
}

describe('chart values', () => {
  test('when linted, then the chart and the all-on values pass; when a value is wrong, then the schema says which', async () => {
    await helmOk(['lint', '--strict', CHART]);
    await helmOk(['lint', '--strict', CHART, '-f', ALL_ON]);
    for (const [set, complaint] of [
      ['agent.autoscaling.mode=bogus', /autoscaling.*mode/],
      ['server.replicaz=2', /replicaz/],
      ['agent.steps.runAsUser=root', /runAsUser/],
      ['persistence.size=lots', /size/],
      ['agent.mode=pods', /mode/],
      ['agent.pool.minReplicas=-1', /minReplicas/],
    ] as const) {
      const r = await helm(['template', 't', CHART, '--set', set]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/schema/);
      expect(r.stderr).toMatch(complaint);
    }
  });
});

describe('the migration hook', () => {
  const kindsOf = async (...set: string[]) => {
    const out = await helmOk(['template', 't', CHART, ...set.flatMap((x) => ['--set', x])]);
    return out
      .split('\n---\n')
      .filter((d) => /helm.sh\/hook: pre-install,pre-upgrade/.test(d))
      .map((d) => `${/^kind: (\w+)/m.exec(d)?.[1]}/${/^ {2}name: (\S+)/m.exec(d)?.[1]}`);
  };
  test('when the database is external, then a hook Job (and a hook Secret unless one is brought) migrates it', async () => {
    expect(await kindsOf()).toEqual([]);
    expect(await kindsOf('database.url=postgres://u:p@db/triad')).toEqual([
      'Secret/t-triad-migrate',
      'Job/t-triad-migrate',
    ]);
    expect(await kindsOf('database.url=postgres://u:p@db/triad', 'migrations.job.enabled=false')).toEqual([]);
    // an existing Secret may lack database-url (embedded database): only on request
    expect(await kindsOf('secrets.existingSecret=mine')).toEqual([]);
    expect(await kindsOf('secrets.existingSecret=mine', 'migrations.job.withExistingSecret=true')).toEqual([
      'Job/t-triad-migrate',
    ]);
  });
});

describe('helm install with the default values', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await namespace('chart-default');
  });

  test('when a pod template breaks the restricted profile, then the namespace reports it (what the install checks for)', async () => {
    const bad = await helmOk([
      'template',
      't',
      CHART,
      '-n',
      ns,
      '--set',
      'agent.securityContext.allowPrivilegeEscalation=true',
    ]);
    const r = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: bad });
    expect(r.stderr).toMatch(
      /would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false \(container "agent"/,
    );
  });

  test('when installed in a restricted namespace, then every Triad pod is admitted and runs on a kwok node', async () => {
    const r = await helm(['install', 't', CHART, '-n', ns, '--wait', '--timeout', '3m']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expectAdmitted(r);
    expect(await releasePods(ns, 't')).toEqual(['agent@kwok Running', 'server@kwok Running']);
    // one replica on a ReadWriteOnce volume: a rolling update's new pod would wait for the volume
    expect(await strategyOf(ns, 't-triad')).toBe('Recreate');
    expect(await everythingIn(ns)).toEqual(
      expect.arrayContaining([
        'deployment.apps/t-triad',
        'deployment.apps/t-triad-agent',
        'horizontalpodautoscaler.autoscaling/t-triad-agent',
        'persistentvolumeclaim/t-triad-data',
        'secret/t-triad',
        'service/t-triad',
        'serviceaccount/t-triad-agent',
      ]),
    );
    // the agent's Role is in the step namespace the chart made, with the steps' NetworkPolicy
    expect((await everythingIn(ns)).filter((o) => o.startsWith('role'))).toEqual([]);
    expect(await everythingIn(`${ns}-steps`)).toEqual([
      'networkpolicy.networking.k8s.io/t-triad-agent-step-isolation',
      'role.rbac.authorization.k8s.io/t-triad-agent',
      'rolebinding.rbac.authorization.k8s.io/t-triad-agent',
    ]);
    // no database.url: no migration hook (the embedded database migrates at start)
    expect(await jobEvents(ns, 't-triad-migrate')).toEqual([]);
    expect(await secretToken(ns, 't-triad')).toBe(testCredentials().secrets.agentToken);
  });

  test('when upgraded, then the agent token is kept and the change is applied', async () => {
    const before = await secretToken(ns, 't-triad');
    const r = await helm([
      'upgrade',
      't',
      CHART,
      '-n',
      ns,
      '--reuse-values',
      '--set',
      'agent.capacity=7',
      '--wait',
      '--timeout',
      '3m',
    ]);
    expect(r.code).toBe(0);
    expectAdmitted(r);
    expect(await secretToken(ns, 't-triad')).toBe(before);
    expect((await envOf(ns, 't-triad-agent')).TRIAD_AGENT_CAPACITY).toBe('7');
  });

  test('when uninstalled, then only the repository volume is left (kept on purpose), and nothing once it is deleted', async () => {
    await helmOk(['uninstall', 't', '-n', ns, '--wait', '--timeout', '2m']);
    await waitUntilOnly(ns, ['persistentvolumeclaim/t-triad-data']);
    await kubectlOk(['delete', 'pvc', 't-triad-data', '-n', ns, '--wait']);
    await waitUntilOnly(ns, []);
  });
});

describe('helm install with every optional block on', () => {
  let ns: string;
  let steps: string;
  beforeAll(async () => {
    ns = await namespace('chart-all');
    steps = await namespace('chart-steps');
  });

  test('when installed, then the migration hook ran first and every optional object exists, accepted by the API server', async () => {
    const r = await helm([
      'install',
      'a',
      CHART,
      '-n',
      ns,
      '-f',
      ALL_ON,
      '--set',
      `agent.steps.namespace=${steps}`,
      '--wait',
      '--timeout',
      '3m',
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expectAdmitted(r);
    expect(await releasePods(ns, 'a')).toEqual([
      'agent@kwok Running',
      'server@kwok Running',
      'server@kwok Running',
    ]);
    expect(await jobEvents(ns, 'a-triad-migrate')).toContain('Completed');
    // two replicas on a ReadWriteMany volume with an external database: rolling updates
    expect(await strategyOf(ns, 'a-triad')).toBe('RollingUpdate');
    // the hook's Job and Secret are deleted once it succeeded
    expect(await everythingIn(ns)).toEqual(
      expect.arrayContaining([
        'deployment.apps/a-triad',
        'deployment.apps/a-triad-agent',
        'httproute.gateway.networking.k8s.io/a-triad',
        'ingress.networking.k8s.io/a-triad',
        'networkpolicy.networking.k8s.io/a-triad',
        'networkpolicy.networking.k8s.io/a-triad-agent',
        'poddisruptionbudget.policy/a-triad',
        'poddisruptionbudget.policy/a-triad-agent',
        'podmonitor.monitoring.coreos.com/a-triad-agent',
        'scaledobject.keda.sh/a-triad-agent',
        'servicemonitor.monitoring.coreos.com/a-triad',
        'triggerauthentication.keda.sh/a-triad-agent',
      ]),
    );
    const left = await everythingIn(ns);
    expect(left.filter((o) => /migrate|horizontalpodautoscaler/.test(o))).toEqual([]);
    expect(await everythingIn(steps)).toEqual([
      'networkpolicy.networking.k8s.io/a-triad-agent-step-isolation',
      'networkpolicy.networking.k8s.io/a-triad-agent-steps',
      'role.rbac.authorization.k8s.io/a-triad-agent',
      'rolebinding.rbac.authorization.k8s.io/a-triad-agent',
    ]);
    const env = await envOf(ns, 'a-triad-agent');
    expect(env).toMatchObject({
      TRIAD_AGENT_NAMESPACE: steps,
      TRIAD_AGENT_CAPACITY: '3',
      TRIAD_AGENT_MEMORY_LIMIT: '2Gi',
    });
  });

  test('when upgraded, then the pre-upgrade migration runs again and the agent token stays', async () => {
    const before = await secretToken(ns, 'a-triad');
    expect(before).toBe('all-on-agent-token');
    const r = await helm([
      'upgrade',
      'a',
      CHART,
      '-n',
      ns,
      '--reuse-values',
      '--set',
      'server.logLevel=debug',
      '--wait',
      '--timeout',
      '3m',
    ]);
    expect(r.code).toBe(0);
    expect(await secretToken(ns, 'a-triad')).toBe(before);
    expect((await jobEvents(ns, 'a-triad-migrate')).filter((e) => e === 'Completed')).toHaveLength(2);
  });

  test('when uninstalled, then nothing of Triad is left in either namespace', async () => {
    await helmOk(['uninstall', 'a', '-n', ns, '--wait', '--timeout', '2m']);
    await waitUntilOnly(ns, []);
    await waitUntilOnly(steps, []);
  });
});

describe('agent.mode=operator', () => {
  test("when installed, then the operator, its namespaced RBAC and the chart's AgentPool are admitted instead of the plain agents", async () => {
    const ns = await namespace('operator-chart');
    const r = await helm([
      ...['install', 'o', CHART, '-n', ns, '--wait', '--timeout', '3m'],
      ...['--set', 'agent.mode=operator'],
      ...['--set', 'agent.pool.maxReplicas=3', '--set', 'agent.pool.labels.pool=linux'],
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expectAdmitted(r);
    expect(await releasePods(ns, 'o')).toEqual(['operator@kwok Running', 'server@kwok Running']);
    const objects = await everythingIn(ns);
    expect(objects).toEqual(
      expect.arrayContaining([
        'agentpool.triad.dev/o-triad',
        'deployment.apps/o-triad-operator',
        'role.rbac.authorization.k8s.io/o-triad-operator-leader',
        'serviceaccount/o-triad-operator',
      ]),
    );
    expect(objects.filter((o) => /o-triad-agent|horizontalpodautoscaler/.test(o))).toEqual([]);
    const pool = JSON.parse(await kubectlOk(['get', 'agentpool', 'o-triad', '-n', ns, '-o', 'json']));
    expect(pool.spec).toMatchObject({
      minReplicas: 0,
      maxReplicas: 3,
      scaleDownDelaySeconds: 300,
      labels: { pool: 'linux' },
      server: `http://o-triad.${ns}.svc:3000`,
      steps: { namespace: `${ns}-steps` },
      podLabels: {
        'app.kubernetes.io/name': 'triad',
        'app.kubernetes.io/instance': 'o',
        'app.kubernetes.io/component': 'agent',
      },
    });
    const role = JSON.parse(await kubectlOk(['get', 'role', 'o-triad-operator', '-n', ns, '-o', 'json']));
    expect(role.rules.map((x: any) => x.resources.join(','))).toEqual([
      'agentpools',
      'agentpools/status',
      'agentpools/finalizers',
      'deployments',
      'secrets',
      'serviceaccounts',
      'roles,rolebindings',
      'pods',
      'pods/log',
      'events',
      'persistentvolumeclaims',
      'events',
      'networkpolicies',
    ]);
    const stepRole = JSON.parse(
      await kubectlOk(['get', 'role', 'o-triad-operator', '-n', `${ns}-steps`, '-o', 'json']),
    );
    expect(stepRole.rules.map((x: any) => x.resources.join(','))).toEqual([
      'roles,rolebindings',
      'pods',
      'pods/log',
      'events',
      'persistentvolumeclaims',
      'networkpolicies',
    ]);
    expect(await kubectlOk(['get', 'clusterrole', '-l', 'app.kubernetes.io/instance=o', '-o', 'name'])).toBe(
      '',
    );
    const u = await helm(['uninstall', 'o', '-n', ns, '--wait', '--timeout', '2m']);
    expect(u.code).toBe(0);
    await waitUntilOnly(ns, ['persistentvolumeclaim/o-triad-data']);
  });
});

describe('the rendered chart applied with kubectl', () => {
  for (const [name, allOn] of [
    ['the default values', false],
    ['values with every optional block on', true],
  ] as const) {
    test(`when ${name} are rendered and applied from another current namespace, then every object lands in the release namespace`, async () => {
      const ns = await namespace('render');
      const steps = allOn ? await namespace('render-steps') : `${ns}-steps`;
      const args = allOn ? ['-f', ALL_ON, '--set', `agent.steps.namespace=${steps}`] : [];
      const rendered = await helmOk(['template', 'r', CHART, '-n', ns, ...args]);
      // the kubeconfig's current namespace is "default"
      const applied = await kubectl(['apply', '--validate=strict', '-f', '-'], { input: rendered });
      expect(applied.stderr).toBe('');
      expect(applied.code).toBe(0);
      expect(await everythingIn('default')).toEqual(['service/kubernetes']);
      const inRelease = await everythingIn(ns);
      expect(inRelease).toContain('deployment.apps/r-triad');
      expect(inRelease).toContain('deployment.apps/r-triad-agent');
      expect(await everythingIn(steps)).toContain('role.rbac.authorization.k8s.io/r-triad-agent');
      await kubectlOk(['delete', '-f', '-', '--wait'], { input: rendered });
      await waitUntilOnly(ns, []);
      await waitUntilOnly(steps, []);
    });
  }
});
