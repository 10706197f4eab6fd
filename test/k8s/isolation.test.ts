/**
 * Isolation by default, as the real API server holds it: the chart's step namespace (restricted
 * Pod Security) with a NetworkPolicy that lets step pods reach only the Triad server, DNS and
 * `agent.steps.egressAllow`; the agent's pod permissions there only; and the operator's RBAC in
 * namespaced mode (the default), which reads no Secret outside the namespace it serves
 * (`kubectl auth can-i` against the API server's authorizer).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { NetworkingV1Api } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { CHART, clients, deleteNamespace, helmOk, kubectl, kubectlOk, newNamespace } from './harness/kube.ts';
import { installAgentPoolCrd } from './harness/operator.ts';

const made: string[] = [];
beforeAll(async () => {
  await installAgentPoolCrd();
});
afterAll(async () => {
  for (const n of made) await deleteNamespace(n);
});

const KINDS = [
  'Namespace',
  'ServiceAccount',
  'Role',
  'RoleBinding',
  'ClusterRole',
  'ClusterRoleBinding',
  'NetworkPolicy',
];

/** Renders release `r` in a new namespace with `set` and applies its namespaces, RBAC and NetworkPolicies. */
async function applyChart(r: string, set: string[]): Promise<string> {
  const ns = await newNamespace('iso');
  made.push(ns, `${ns}-steps`);
  const out = await helmOk(['template', r, CHART, '-n', ns, ...set.flatMap((x) => ['--set', x])]);
  const docs = parseAllDocuments(out)
    .map((d) => d.toJS())
    .filter((d) => KINDS.includes(d?.kind));
  await kubectlOk(['apply', '--validate=strict', '-f', '-'], {
    input: docs.map((d) => JSON.stringify(d)).join('\n'),
  });
  return ns;
}

/** `kubectl auth can-i` as a service account: true for "yes". */
async function can(sa: string, verb: string, resource: string, namespace: string): Promise<boolean> {
  const r = await kubectl([
    'auth',
    'can-i',
    verb,
    resource,
    '-n',
    namespace,
    `--as=system:serviceaccount:${sa}`,
  ]);
  return r.stdout.trim() === 'yes';
}

async function policyOf(namespace: string, name: string): Promise<unknown> {
  const np = clients().kc.makeApiClient(NetworkingV1Api);
  return (await np.readNamespacedNetworkPolicy({ name, namespace })).spec;
}

const SERVER_AND_DNS = (ns: string, release: string) => [
  {
    to: [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
        podSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'triad',
            'app.kubernetes.io/instance': release,
            'app.kubernetes.io/component': 'server',
          },
        },
      },
    ],
    ports: [{ port: 3000, protocol: 'TCP' }],
  },
  {
    to: [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
      },
    ],
    ports: [
      { port: 53, protocol: 'UDP' },
      { port: 53, protocol: 'TCP' },
    ],
  },
];

describe('the step namespace (agent.mode=deployment, default values)', () => {
  test('when the chart is applied, then steps get their own restricted namespace whose NetworkPolicy admits nothing in and names only the server and DNS out; the agent makes pods there only', async () => {
    const ns = await applyChart('i', []);
    const steps = await clients().core.readNamespace({ name: `${ns}-steps` });
    expect(steps.metadata?.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    expect(await policyOf(`${ns}-steps`, 'i-triad-agent-step-isolation')).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/managed-by': 'triad-agent' } },
      policyTypes: ['Ingress', 'Egress'],
      egress: SERVER_AND_DNS(ns, 'i'),
    });
    const agent = `${ns}:i-triad-agent`;
    expect(await can(agent, 'create', 'pods', `${ns}-steps`)).toBe(true);
    expect(await can(agent, 'get', 'pods/log', `${ns}-steps`)).toBe(true);
    expect(await can(agent, 'create', 'persistentvolumeclaims', `${ns}-steps`)).toBe(true);
    for (const [verb, what] of [
      ['create', 'pods'],
      ['get', 'pods'],
      ['get', 'secrets'],
    ]) {
      expect(await can(agent, verb!, what!, ns)).toBe(false);
    }
    expect(await can(agent, 'get', 'secrets', `${ns}-steps`)).toBe(false);
  });

  test('when egressAllow names CIDRs, then exactly those are added; open egress is one value; networkPolicy.enabled=false drops it', async () => {
    const ns = await applyChart('e', [
      'agent.steps.egressAllow[0].cidr=10.20.0.0/16',
      'agent.steps.egressAllow[0].except[0]=10.20.5.0/24',
      'agent.steps.egressAllow[0].ports[0].port=443',
      'agent.steps.egressAllow[1].cidr=0.0.0.0/0',
    ]);
    const spec = (await policyOf(`${ns}-steps`, 'e-triad-agent-step-isolation')) as { egress: unknown[] };
    expect(spec.egress).toEqual([
      ...SERVER_AND_DNS(ns, 'e'),
      {
        to: [{ ipBlock: { cidr: '10.20.0.0/16', except: ['10.20.5.0/24'] } }],
        ports: [{ port: 443, protocol: 'TCP' }],
      },
      { to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] },
    ]);
    const off = await helmOk(['template', 'e', CHART, '--set', 'agent.steps.networkPolicy.enabled=false']);
    expect(off).not.toMatch(/name: e-triad-agent-step-isolation/);
  });
});

describe("the operator's RBAC (agent.mode=operator)", () => {
  test('when namespaced (the default), then it reads Secrets only in the namespaces it serves; cluster-wide mode reads them everywhere', async () => {
    const ns = await applyChart('o', ['agent.mode=operator']);
    const elsewhere = await newNamespace('iso-other');
    made.push(elsewhere);
    const op = `${ns}:o-triad-operator`;
    expect(await can(op, 'get', 'secrets', ns)).toBe(true);
    expect(await can(op, 'create', 'deployments.apps', ns)).toBe(true);
    expect(await can(op, 'list', 'agentpools.triad.dev', ns)).toBe(true);
    // the step namespace: it grants and sweeps step pods there, and reads no Secret
    expect(await can(op, 'create', 'roles.rbac.authorization.k8s.io', `${ns}-steps`)).toBe(true);
    expect(await can(op, 'delete', 'pods', `${ns}-steps`)).toBe(true);
    for (const where of [`${ns}-steps`, elsewhere, 'kube-system', 'default']) {
      expect(await can(op, 'get', 'secrets', where)).toBe(false);
      expect(await can(op, 'list', 'secrets', where)).toBe(false);
    }
    expect(await can(op, 'list', 'agentpools.triad.dev', elsewhere)).toBe(false);

    // several served namespaces (a comma list): Secrets there, still not in the release namespace
    const team = await newNamespace('iso-team');
    made.push(team);
    const multi = await applyChart('m', [
      'agent.mode=operator',
      `operator.watchNamespace=${elsewhere}\\,${team}`,
    ]);
    const mop = `${multi}:m-triad-operator`;
    expect([await can(mop, 'get', 'secrets', elsewhere), await can(mop, 'get', 'secrets', team)]).toEqual([
      true,
      true,
    ]);
    expect(await can(mop, 'get', 'secrets', multi)).toBe(false);

    const wide = await applyChart('w', ['agent.mode=operator', 'operator.clusterWide=true']);
    try {
      expect(await can(`${wide}:w-triad-operator`, 'get', 'secrets', elsewhere)).toBe(true);
    } finally {
      await kubectl([
        'delete',
        'clusterrole,clusterrolebinding',
        `w-triad-operator-${wide}`,
        '--ignore-not-found',
      ]);
    }
  });
});
