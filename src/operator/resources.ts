import type {
  KubernetesObject,
  V1Deployment,
  V1EnvVar,
  V1OwnerReference,
  V1Role,
  V1RoleBinding,
  V1Secret,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import { formatLabels } from '../pipelines/labels.ts';
import {
  ANNOTATION_AGENT_ID,
  API_VERSION,
  KIND,
  LABEL_MANAGED_BY,
  LABEL_POOL,
  MANAGED_BY,
  names,
  settings,
  stepNamespace,
  type AgentPool,
} from './types.ts';
import { applyAgentTemplate } from './agent-template.ts';

/**
 * The objects a pool is made of, as server-side apply bodies: the agents' ServiceAccount, a
 * least-privilege Role and RoleBinding in the step namespace (what the kubernetes executor does
 * there), and the agents' Deployment. Each carries a controller owner reference to the pool, so
 * deleting the pool garbage-collects them (a step namespace other than the pool's cannot be
 * owned: its Role and RoleBinding are deleted by the finalizer).
 */

/** The pool as the controlling owner of an object in its namespace. */
export function owner(pool: AgentPool): V1OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: pool.metadata!.name!,
    uid: pool.metadata!.uid!,
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function poolLabels(pool: AgentPool): Record<string, string> {
  return { [LABEL_MANAGED_BY]: MANAGED_BY, [LABEL_POOL]: pool.metadata!.name! };
}

function meta(pool: AgentPool, name: string, namespace = pool.metadata!.namespace!) {
  const sameNamespace = namespace === pool.metadata!.namespace;
  return {
    name,
    namespace,
    labels: { ...poolLabels(pool), 'app.kubernetes.io/component': 'agent' },
    ...(sameNamespace ? { ownerReferences: [owner(pool)] } : {}),
  };
}

export function serviceAccount(pool: AgentPool): V1ServiceAccount & KubernetesObject {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(pool, names(pool).serviceAccount) };
}

/** Step pods (create, watch, read logs, delete) and workspace claims, in the step namespace only. */
export function role(pool: AgentPool): V1Role & KubernetesObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: meta(pool, names(pool).role, stepNamespace(pool)),
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
      { apiGroups: [''], resources: ['events'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['get', 'list', 'create', 'delete'] },
    ],
  };
}

export function roleBinding(pool: AgentPool): V1RoleBinding & KubernetesObject {
  const n = names(pool);
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: meta(pool, n.role, stepNamespace(pool)),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: n.role },
    subjects: [{ kind: 'ServiceAccount', name: n.serviceAccount, namespace: pool.metadata!.namespace! }],
  };
}

/** The agent token Secret (the token is only known when the agent is registered). */
export function tokenSecret(pool: AgentPool, agentId: number, token: string): V1Secret & KubernetesObject {
  const m = meta(pool, names(pool).secret);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { ...m, annotations: { [ANNOTATION_AGENT_ID]: String(agentId) } },
    type: 'Opaque',
    stringData: { token },
  };
}

const env = (name: string, value: string | number | undefined): V1EnvVar[] =>
  value === undefined ? [] : [{ name, value: String(value) }];

/** The agents: `replicas` as the scaler decided, the kubernetes executor with the pool's step settings. */
export function deployment(
  pool: AgentPool,
  replicas: number,
  server: string,
): V1Deployment & KubernetesObject {
  const s = settings(pool);
  const n = names(pool);
  const steps = s.steps ?? {};
  const r = steps.resources;
  const selector = { [LABEL_POOL]: pool.metadata!.name!, 'app.kubernetes.io/component': 'agent' };
  const d: V1Deployment & KubernetesObject = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(pool, n.agents),
    spec: {
      replicas,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: { ...s.podLabels, ...poolLabels(pool), ...selector } },
        spec: {
          serviceAccountName: n.serviceAccount,
          // A stopping agent finishes its pipelines (drainSeconds), then reports and cleans up.
          terminationGracePeriodSeconds: s.drainSeconds + 30,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 1000,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'agent',
              image: s.image,
              ...(s.imagePullPolicy === undefined ? {} : { imagePullPolicy: s.imagePullPolicy }),
              args: ['agent'],
              ports: [{ name: 'metrics', containerPort: 9090 }],
              env: [
                { name: 'TRIAD_AGENT_SERVER', value: s.server ?? server },
                { name: 'TRIAD_AGENT_TOKEN', valueFrom: { secretKeyRef: { name: n.secret, key: 'token' } } },
                { name: 'TRIAD_AGENT_EXECUTOR', value: 'kubernetes' },
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                { name: 'TRIAD_AGENT_CAPACITY', value: String(s.capacity) },
                { name: 'TRIAD_AGENT_LABELS', value: formatLabels(s.labels) },
                { name: 'TRIAD_AGENT_DRAIN_SECONDS', value: String(s.drainSeconds) },
                { name: 'TRIAD_AGENT_NAMESPACE', value: stepNamespace(pool) },
                ...env('TRIAD_AGENT_CLONE_IMAGE', steps.cloneImage ?? s.image),
                ...env('TRIAD_AGENT_PENDING_TIMEOUT', steps.pendingTimeoutSeconds),
                ...env('TRIAD_AGENT_WORKSPACE_SIZE', steps.workspaceSize),
                ...env('TRIAD_AGENT_STORAGE_CLASS', steps.storageClass),
                ...env('TRIAD_AGENT_SERVICE_ACCOUNT', steps.serviceAccount),
                ...env('TRIAD_AGENT_RUN_AS_USER', steps.runAsUser),
                ...env(
                  'TRIAD_AGENT_NODE_SELECTOR',
                  steps.nodeSelector === undefined ? undefined : JSON.stringify(steps.nodeSelector),
                ),
                ...env(
                  'TRIAD_AGENT_TOLERATIONS',
                  steps.tolerations === undefined ? undefined : JSON.stringify(steps.tolerations),
                ),
                ...env('TRIAD_AGENT_CPU_REQUEST', r?.requests?.cpu),
                ...env('TRIAD_AGENT_CPU_LIMIT', r?.limits?.cpu),
                ...env('TRIAD_AGENT_MEMORY_REQUEST', r?.requests?.memory),
                ...env('TRIAD_AGENT_MEMORY_LIMIT', r?.limits?.memory),
                ...env('TRIAD_AGENT_MAX_CPU', steps.maxResources?.cpu),
                ...env('TRIAD_AGENT_MAX_MEMORY', steps.maxResources?.memory),
                ...env('TRIAD_AGENT_EPHEMERAL_STORAGE', steps.ephemeralStorage),
                ...env(
                  'TRIAD_AGENT_STEP_TEMPLATE',
                  s.stepTemplate === undefined ? undefined : JSON.stringify(s.stepTemplate),
                ),
              ],
              readinessProbe: { httpGet: { path: '/healthz', port: 'metrics' }, periodSeconds: 10 },
              ...(s.resources === undefined ? {} : { resources: s.resources }),
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
            },
          ],
          volumes: [{ name: 'tmp', emptyDir: {} }],
        },
      },
    },
  };
  // spec.template goes after the pool's other fields; what the operator owns is put back.
  d.spec!.template = applyAgentTemplate(d.spec!.template, s.template);
  return d;
}
