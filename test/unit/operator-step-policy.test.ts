import { describe, expect, test } from '@jest/globals';
import { parseStepPolicy, stepNetworkPolicy } from '../../src/operator/step-policy.ts';
import type { AgentPool } from '../../src/operator/types.ts';

const SETTINGS = {
  server: [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'triad' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/component': 'server' } },
    },
  ],
  serverPort: 3000,
  dns: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
};

const pool = (steps: AgentPool['spec']['steps'] = {}): AgentPool => ({
  apiVersion: 'triad.dev/v1alpha1',
  kind: 'AgentPool',
  metadata: { name: 'gpu', namespace: 'team-a', uid: 'uid-1' },
  spec: { image: 'triad:1', steps },
});

describe('TRIAD_OPERATOR_STEP_POLICY', () => {
  test('when unset or blank, then no policy is made; when set, then its server, port and DNS are read', () => {
    expect(parseStepPolicy(undefined)).toBeUndefined();
    expect(parseStepPolicy('  ')).toBeUndefined();
    expect(parseStepPolicy(JSON.stringify(SETTINGS))).toEqual(SETTINGS);
  });

  test('when it is not JSON or lacks a field, then the message names the problem', () => {
    expect(() => parseStepPolicy('{server')).toThrow('TRIAD_OPERATOR_STEP_POLICY is not JSON');
    expect(() => parseStepPolicy(JSON.stringify({ ...SETTINGS, serverPort: 0 }))).toThrow(/serverPort/);
    expect(() => parseStepPolicy(JSON.stringify({ ...SETTINGS, server: [] }))).toThrow(/server/);
    expect(() => parseStepPolicy(JSON.stringify({ serverPort: 3000, server: SETTINGS.server }))).toThrow(
      /dns/,
    );
  });
});

describe("a pool's step NetworkPolicy", () => {
  test('when the pool names no egressAllow, then step pods get no ingress and egress to the server and DNS only', () => {
    const np = stepNetworkPolicy(pool(), SETTINGS);
    expect(np.metadata).toMatchObject({
      name: 'gpu-agent-steps',
      namespace: 'team-a',
      labels: { 'app.kubernetes.io/managed-by': 'triad-operator', 'triad.dev/agent-pool': 'gpu' },
      ownerReferences: [{ kind: 'AgentPool', name: 'gpu', uid: 'uid-1' }],
    });
    expect(np.spec).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/managed-by': 'triad-agent' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [
        { to: SETTINGS.server, ports: [{ port: 3000, protocol: 'TCP' }] },
        {
          to: SETTINGS.dns,
          ports: [
            { port: 53, protocol: 'UDP' },
            { port: 53, protocol: 'TCP' },
          ],
        },
      ],
    });
  });

  test('when the pool allows CIDRs, then each is one more egress rule; in another step namespace there is no owner reference', () => {
    const np = stepNetworkPolicy(
      pool({
        namespace: 'triad-steps',
        egressAllow: [
          {
            cidr: '10.0.0.0/8',
            except: ['10.1.0.0/16'],
            ports: [{ port: 443 }, { port: 53, protocol: 'UDP' }],
          },
          { cidr: '0.0.0.0/0' },
        ],
      }),
      SETTINGS,
    );
    expect(np.metadata?.namespace).toBe('triad-steps');
    expect(np.metadata?.ownerReferences).toBeUndefined();
    expect(np.spec?.egress?.slice(2)).toEqual([
      {
        to: [{ ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16'] } }],
        ports: [
          { port: 443, protocol: 'TCP' },
          { port: 53, protocol: 'UDP' },
        ],
      },
      { to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] },
    ]);
  });
});
