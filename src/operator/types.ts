import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Condition,
  type V1ResourceRequirements,
  type V1Toleration,
} from '@kubernetes/client-node';
import { MAX_LABELS, validLabelKey, validLabelValue } from '../pipelines/labels.ts';
import { stepTemplateProblems, type PodTemplate } from '../../agent/executors/pod-template.ts';
import { agentTemplateProblems } from './agent-template.ts';

/** The AgentPool custom resource (`triad.dev/v1alpha1`): its spec, status and the names derived from it. */
export const GROUP = 'triad.dev';
export const VERSION = 'v1alpha1';
export const PLURAL = 'agentpools';
export const KIND = 'AgentPool';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Request options of a JSON merge patch. */
export const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
export const notFound = (err: unknown) => err instanceof ApiException && err.code === 404;

/** Removed once the pool's agent registration is deleted on the server. */
export const FINALIZER = 'triad.dev/agent-registration';
/** Field manager of every server-side apply of the operator. */
export const MANAGER = 'triad-operator';
/** Labels on everything the operator creates for a pool. */
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'triad-operator';
export const LABEL_POOL = 'triad.dev/agent-pool';
/** On the token Secret: the id of the agent registered for the pool. */
export const ANNOTATION_AGENT_ID = 'triad.dev/agent-id';

export type StepSettings = {
  namespace?: string;
  resources?: V1ResourceRequirements;
  nodeSelector?: Record<string, string>;
  tolerations?: V1Toleration[];
  serviceAccount?: string;
  runAsUser?: number;
  workspaceSize?: string;
  storageClass?: string;
  cloneImage?: string;
  pendingTimeoutSeconds?: number;
  /** Where step pods may connect besides the server and DNS (with TRIAD_OPERATOR_STEP_POLICY). */
  egressAllow?: {
    cidr: string;
    except?: string[];
    ports?: { port: number | string; protocol?: 'TCP' | 'UDP' | 'SCTP' }[];
  }[];
  /** The most one step may ask for in its `resources` (TRIAD_AGENT_MAX_CPU / _MEMORY of the agents). */
  maxResources?: { cpu?: string | number; memory?: string | number };
  /** `ephemeral-storage` request of each step container (TRIAD_AGENT_EPHEMERAL_STORAGE). */
  ephemeralStorage?: string | number;
};

export type AgentPoolSpec = {
  /** The Triad address the agents use (default: the operator's own). */
  server?: string;
  image: string;
  imagePullPolicy?: string;
  /** Pipelines one agent runs at once. */
  capacity?: number;
  minReplicas?: number;
  maxReplicas?: number;
  scaleDownDelaySeconds?: number;
  /** How long a stopping agent lets its pipelines finish. */
  drainSeconds?: number;
  /** Pool labels: the agents claim pipelines whose file names exactly these labels. */
  labels?: Record<string, string>;
  /** Extra labels on the agent pods (what NetworkPolicies, PodMonitors or PDBs select). */
  podLabels?: Record<string, string>;
  /** Resources of the agent container itself. */
  resources?: V1ResourceRequirements;
  steps?: StepSettings;
  /** Labels, annotations and a strategic-merge pod spec patch for the agent pods (agent-template.ts). */
  template?: PodTemplate;
  /** The same for every step pod, passed to the agents as TRIAD_AGENT_STEP_TEMPLATE. */
  stepTemplate?: PodTemplate;
  /** Pins the pool at this many agents (the `scale` subresource); unset: the queue scales it. */
  replicas?: number;
};

export type AgentPoolStatus = {
  observedGeneration?: number;
  replicas?: number;
  readyReplicas?: number;
  desiredReplicas?: number;
  pending?: number;
  running?: number;
  agentId?: number;
  agentName?: string;
  /** The agent pods' label selector (the `scale` subresource's, for autoscalers). */
  selector?: string;
  conditions?: V1Condition[];
};

export type AgentPool = KubernetesObject & { spec: AgentPoolSpec; status?: AgentPoolStatus };

/** The spec with its defaults applied (the CRD defaults them too; older objects may lack them). */
export type PoolSettings = Required<
  Pick<
    AgentPoolSpec,
    'capacity' | 'minReplicas' | 'maxReplicas' | 'scaleDownDelaySeconds' | 'drainSeconds' | 'labels'
  >
> &
  AgentPoolSpec;

export function settings(pool: AgentPool): PoolSettings {
  const s = pool.spec;
  return {
    ...s,
    capacity: s.capacity ?? 2,
    minReplicas: s.minReplicas ?? 0,
    maxReplicas: s.maxReplicas ?? 5,
    scaleDownDelaySeconds: s.scaleDownDelaySeconds ?? 300,
    drainSeconds: s.drainSeconds ?? 60,
    labels: s.labels ?? {},
  };
}

/** Annotation on a pool: its deletion skips deregistering the agent (the server is gone for good). */
export const ANNOTATION_SKIP_DEREGISTRATION = 'triad.dev/skip-deregistration';

/** The namespace where the pool's step pods run. */
export function stepNamespace(pool: AgentPool): string {
  return pool.spec.steps?.namespace ?? pool.metadata!.namespace!;
}

function labelsProblem(what: string, labels: unknown, max: number): string | undefined {
  if (labels === undefined) return undefined;
  if (typeof labels !== 'object' || labels === null || Array.isArray(labels))
    return `${what} must be a map of label keys to values`;
  const entries = Object.entries(labels);
  if (entries.length > max) return `${what} has more than ${max} labels`;
  for (const [k, v] of entries) {
    if (!validLabelKey(k)) return `${what}: invalid label key ${JSON.stringify(k)}`;
    if (typeof v !== 'string' || !validLabelValue(v))
      return `${what}: invalid value ${JSON.stringify(v)} of label ${k}`;
  }
  return undefined;
}

/**
 * What a spec cannot be run with (the schema rejects most of it; this covers objects it let in and
 * the operator's own rules). `stepNamespaces`: the namespaces besides the pool's own where its steps
 * may run (`*`: any); a pool naming another one would make the operator grant its agents pod
 * creation there.
 */
export function specProblem(pool: AgentPool, stepNamespaces: readonly string[] = []): string | undefined {
  const s = settings(pool);
  if (s.maxReplicas < s.minReplicas)
    return `maxReplicas (${s.maxReplicas}) is less than minReplicas (${s.minReplicas})`;
  if (s.capacity < 1) return 'capacity must be at least 1';
  if (typeof s.image !== 'string' || s.image === '') return 'image is required';
  const labels = labelsProblem('labels', pool.spec.labels, MAX_LABELS);
  if (labels !== undefined) return labels;
  const podLabels = labelsProblem('podLabels', pool.spec.podLabels, Number.MAX_SAFE_INTEGER);
  if (podLabels !== undefined) return podLabels;
  const template = templateProblem(pool);
  if (template !== undefined) return template;
  return stepNamespaceProblem(pool, stepNamespaces);
}

/** The first reason `spec.template` or `spec.stepTemplate` cannot be used (the CRD says the same). */
export function templateProblem(pool: AgentPool): string | undefined {
  const agent = agentTemplateProblems(pool.spec.template)[0];
  if (agent !== undefined) return `template: ${agent}`;
  const step = stepTemplateProblems(pool.spec.stepTemplate)[0];
  return step === undefined ? undefined : `stepTemplate: ${step}`;
}

/** Why the pool's step namespace is not allowed (its own, one of `stepNamespaces`, or any with `*`). */
export function stepNamespaceProblem(pool: AgentPool, stepNamespaces: readonly string[]): string | undefined {
  const ns = stepNamespace(pool);
  if (ns === pool.metadata!.namespace || stepNamespaces.includes('*') || stepNamespaces.includes(ns))
    return undefined;
  return `steps.namespace ${JSON.stringify(ns)} is not allowed: the operator runs steps only in the pool's own namespace${
    stepNamespaces.length === 0 ? '' : ` or in ${stepNamespaces.join(', ')}`
  } (TRIAD_OPERATOR_STEP_NAMESPACES)`;
}

/** `namespace/name` of an object. */
export function keyOf(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

/** Names of a pool's objects. */
export function names(pool: AgentPool) {
  const name = pool.metadata!.name!;
  return {
    agents: `${name}-agent`,
    serviceAccount: `${name}-agent`,
    role: `${name}-agent-steps`,
    secret: `${name}-agent-token`,
    /** The agent registered on the server (one per pool object: the uid tells recreated pools apart). */
    agentName: `agentpool:${pool.metadata!.namespace!}/${name}:${pool.metadata!.uid!}`,
  };
}
