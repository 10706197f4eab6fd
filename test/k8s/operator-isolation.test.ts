/**
 * The operator as the chart runs it by default, on the real control plane: namespaced RBAC (Roles
 * in the namespace it serves, no ClusterRole), a token with only `agents:admin` (the harness's
 * operator token), and TRIAD_OPERATOR_STEP_POLICY: each pool's step namespace gets a NetworkPolicy
 * with no ingress and egress to the server, DNS and the pool's `spec.steps.egressAllow` only.
 */
import { describe, expect, test } from '@jest/globals';
import { NetworkingV1Api } from '@kubernetes/client-node';
import { clients, waitFor } from './harness/kube.ts';
import { operatorWorld } from './harness/operator-world.ts';
import { condition, createPool, deletePool, registered, waitForPool } from './harness/operator.ts';

const w = operatorWorld('operator-iso', { startOperator: false, namespaced: true });

const SERVER = [{ podSelector: { matchLabels: { 'app.kubernetes.io/component': 'server' } } }];
const DNS = [
  {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
    podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
  },
];

async function policy(name: string): Promise<any> {
  const np = clients().kc.makeApiClient(NetworkingV1Api);
  return np.readNamespacedNetworkPolicy({ name, namespace: w.ns }).catch(() => undefined);
}

describe('the operator with step NetworkPolicies', () => {
  test("when a pool is created, then its step namespace gets the policy with the pool's egressAllow, and it goes with the pool", async () => {
    w.operator(undefined, {
      TRIAD_OPERATOR_STEP_POLICY: JSON.stringify({ server: SERVER, serverPort: 3000, dns: DNS }),
    });
    try {
      await createPool(w.ns, 'iso', {
        image: 'triad:test',
        minReplicas: 0,
        maxReplicas: 1,
        steps: { egressAllow: [{ cidr: '10.30.0.0/16', ports: [{ port: 443 }] }] },
      });
      const pool = await waitForPool(w.ns, 'iso', 'ready', (p) => condition(p, 'Ready')?.status === 'True');
      expect(condition(pool, 'Ready')).toMatchObject({ reason: 'ScaledToZero' });
      expect(await registered(w.s, w.ns, 'iso')).toHaveLength(1);
      const np = await policy('iso-agent-steps');
      expect(np.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'AgentPool', name: 'iso' }),
      ]);
      expect(np.spec).toEqual({
        podSelector: { matchLabels: { 'app.kubernetes.io/managed-by': 'triad-agent' } },
        policyTypes: ['Ingress', 'Egress'],
        egress: [
          { to: SERVER, ports: [{ port: 3000, protocol: 'TCP' }] },
          {
            to: DNS,
            ports: [
              { port: 53, protocol: 'UDP' },
              { port: 53, protocol: 'TCP' },
            ],
          },
          { to: [{ ipBlock: { cidr: '10.30.0.0/16' } }], ports: [{ port: 443, protocol: 'TCP' }] },
        ],
      });

      await deletePool(w.ns, 'iso');
      await waitFor(
        'the policy to go with the pool',
        async () => (await policy('iso-agent-steps')) === undefined,
      );
      expect(await registered(w.s, w.ns, 'iso')).toEqual([]);
    } catch (err) {
      w.failWithLog(err);
    }
  });
});
