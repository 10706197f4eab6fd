import type {
  KubernetesObject,
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicyPeer,
} from '@kubernetes/client-node';
import { z } from 'zod';
import {
  LABEL_MANAGED_BY as STEP_LABEL_MANAGED_BY,
  MANAGED_BY as STEP_MANAGED_BY,
} from '../../agent/executors/pod-spec.ts';
import { owner, poolLabels } from './resources.ts';
import { names, stepNamespace, type AgentPool, type StepSettings } from './types.ts';

/**
 * The NetworkPolicy the operator gives a pool's step namespace when it is configured with
 * TRIAD_OPERATOR_STEP_POLICY: step pods accept no connection, and connect only to the Triad
 * server's pods (the clone), to DNS and to the pool's `spec.steps.egressAllow`.
 */

/** An allowed destination of step pods (`agent.steps.egressAllow`, `spec.steps.egressAllow`). */
export type EgressAllow = NonNullable<StepSettings['egressAllow']>[number];

/** Where the server and DNS are, as NetworkPolicy peers (the chart renders them). */
export type StepPolicySettings = {
  server: V1NetworkPolicyPeer[];
  serverPort: number;
  dns: V1NetworkPolicyPeer[];
};

const peers = z.array(z.record(z.string(), z.unknown())).min(1);
const settingsSchema = z.object({
  server: peers,
  serverPort: z.int().min(1).max(65535),
  dns: peers,
});

/** TRIAD_OPERATOR_STEP_POLICY (JSON `{server, serverPort, dns}`); undefined: no policy is made. */
export function parseStepPolicy(raw: string | undefined): StepPolicySettings | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new Error('TRIAD_OPERATOR_STEP_POLICY is not JSON');
  }
  const r = settingsSchema.safeParse(json);
  if (!r.success) {
    throw new Error(
      `TRIAD_OPERATOR_STEP_POLICY: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return r.data;
}

/** The egress rules: the server, DNS, then each allowed destination. */
export function stepEgress(
  s: StepPolicySettings,
  allow: readonly EgressAllow[] = [],
): V1NetworkPolicyEgressRule[] {
  return [
    { to: s.server, ports: [{ port: s.serverPort, protocol: 'TCP' }] },
    {
      to: s.dns,
      ports: [
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
      ],
    },
    ...allow.map((a) => ({
      to: [{ ipBlock: { cidr: a.cidr, ...(a.except === undefined ? {} : { except: a.except }) } }],
      ...(a.ports === undefined
        ? {}
        : { ports: a.ports.map((p) => ({ port: p.port, protocol: p.protocol ?? 'TCP' })) }),
    })),
  ];
}

/**
 * The pool's step NetworkPolicy, in its step namespace (named like its step Role). It selects every
 * step pod of that namespace: pools sharing a step namespace add up their allow-lists.
 */
export function stepNetworkPolicy(
  pool: AgentPool,
  s: StepPolicySettings,
): V1NetworkPolicy & KubernetesObject {
  const ns = stepNamespace(pool);
  const same = ns === pool.metadata!.namespace;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: names(pool).role,
      namespace: ns,
      labels: { ...poolLabels(pool), 'app.kubernetes.io/component': 'steps' },
      ...(same ? { ownerReferences: [owner(pool)] } : {}),
    },
    spec: {
      podSelector: { matchLabels: { [STEP_LABEL_MANAGED_BY]: STEP_MANAGED_BY } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: stepEgress(s, pool.spec.steps?.egressAllow),
    },
  };
}
