/**
 * Pure builders for the Kubernetes objects of the `kubernetes` executor (one PVC per pipeline, one
 * Pod per step) and pure readers of a step pod's status. No I/O here: the executor does the calls.
 */
import type {
  V1Container,
  V1EnvVar,
  V1OwnerReference,
  V1PersistentVolumeClaim,
  V1Pod,
  V1PodSecurityContext,
  V1SecurityContext,
  V1Toleration,
} from '@kubernetes/client-node';
import { cloneScript, type Job, type JobStep, stepScript } from '../types.ts';
import { applyStepTemplate, type PodTemplate } from './pod-template.ts';
import { containerResources as resources, keepStepResources } from './pod-resources.ts';

export { stepScript };

export const MANAGED_BY = 'triad-agent';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_PIPELINE = 'triad.dev/pipeline';
export const LABEL_STEP = 'triad.dev/step';
export const LABEL_AGENT = 'triad.dev/agent';
export const STEP_CONTAINER = 'step';
export const CLONE_CONTAINER = 'clone';
export const WORKSPACE_VOLUME = 'workspace';
/** Written by the clone init container once the repository is checked out in the workspace. */
export const CLONED_MARKER = '.triad-cloned';

/** Exit codes for steps that ended without their container's own exit code. */
export const EXIT_NOT_STARTED = 125;
export const EXIT_DEADLINE = 124;
export const EXIT_CANCELLED = 130;

export type Quantities = { cpu?: string; memory?: string };

export type PodSpecOptions = {
  namespace: string;
  /** Image of the clone init container: needs sh, git, hg and fossil (the Triad image has them). */
  cloneImage: string;
  /** Mount point of the workspace volume; the repository is checked out at `<workspaceDir>/src`. */
  workspaceDir: string;
  workspaceSize: string;
  /** undefined = the cluster's default storage class. */
  storageClass?: string | undefined;
  workspaceAccessMode: 'ReadWriteOnce' | 'ReadWriteMany' | 'ReadWriteOncePod';
  /** `activeDeadlineSeconds` of every step pod: a backstop against steps that never end. */
  deadlineSeconds: number;
  requests: Quantities;
  limits: Quantities;
  /** `ephemeral-storage` request of the step container (its writable layer, logs); undefined = none. */
  ephemeralStorage?: string | undefined;
  nodeSelector: Record<string, string>;
  tolerations: V1Toleration[];
  /** undefined = no service account token is mounted into step pods. */
  serviceAccountName?: string | undefined;
  /** undefined = the image's user. */
  runAsUser?: number | undefined;
  runAsGroup?: number | undefined;
  fsGroup?: number | undefined;
  runAsNonRoot: boolean;
  imagePullSecrets: string[];
  /** Label value naming the agent instance that owns the objects (its sweeper only touches those). */
  instance?: string | undefined;
  /** The agent's own pod, so that Kubernetes garbage-collects the objects when the agent pod goes. */
  owner?: V1OwnerReference | undefined;
  /** Labels, annotations and a strategic-merge pod spec patch for every step pod (pod-template.ts). */
  stepTemplate?: PodTemplate | undefined;
};

export const DEFAULT_CLONE_IMAGE = 'triad-clone:latest';

export function defaultPodSpecOptions(overrides: Partial<PodSpecOptions> = {}): PodSpecOptions {
  return {
    namespace: 'default',
    cloneImage: DEFAULT_CLONE_IMAGE,
    workspaceDir: '/workspace',
    workspaceSize: '1Gi',
    workspaceAccessMode: 'ReadWriteOnce',
    deadlineSeconds: 3600,
    requests: {},
    limits: {},
    nodeSelector: {},
    tolerations: [],
    runAsUser: 1000,
    runAsGroup: 1000,
    fsGroup: 1000,
    runAsNonRoot: true,
    imagePullSecrets: [],
    ...overrides,
  };
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** A valid DNS-1123 label (pod, PVC and container names): lowercase alphanumerics and '-', <= 63. */
export function isDns1123Label(name: string): boolean {
  return name.length <= 63 && DNS1123_LABEL.test(name);
}

/** Turns any string into a valid label value (<= 63, [A-Za-z0-9._-], alphanumeric at both ends). */
export function labelValue(s: string): string {
  return s
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+/, '')
    .replace(/[^A-Za-z0-9]+$/, '');
}

/** Single-quotes a string for `sh`. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function workspaceClaimName(pipelineId: number): string {
  return `triad-ws-${pipelineId}`;
}

/** `triad-p<pipeline>-s<step>-<suffix>`; the suffix keeps reruns of the same step apart. */
export function stepPodName(pipelineId: number, stepNumber: number, suffix: string): string {
  const s = suffix
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '')
    .slice(0, 10);
  return `triad-p${pipelineId}-s${stepNumber}${s === '' ? '' : `-${s}`}`;
}

function baseLabels(pipelineId: number, opts: PodSpecOptions): Record<string, string> {
  const labels: Record<string, string> = {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_PIPELINE]: String(pipelineId),
  };
  const instance = opts.instance === undefined ? '' : labelValue(opts.instance);
  if (instance !== '') labels[LABEL_AGENT] = instance;
  return labels;
}

/** Label selector of everything this agent instance made (optionally of one pipeline). */
export function ownedSelector(instance: string | undefined, pipelineId?: number): string {
  const parts = [`${LABEL_MANAGED_BY}=${MANAGED_BY}`];
  const i = instance === undefined ? '' : labelValue(instance);
  if (i !== '') parts.push(`${LABEL_AGENT}=${i}`);
  if (pipelineId !== undefined) parts.push(`${LABEL_PIPELINE}=${pipelineId}`);
  return parts.join(',');
}

function annotations(job: Job): Record<string, string> {
  return {
    'triad.dev/repo': `${job.org}/${job.repo}`,
    'triad.dev/commit': job.commit_node,
    'triad.dev/pipeline-number': String(job.number),
  };
}

/** The per-pipeline workspace shared by the pipeline's step pods. */
export function workspacePvc(job: Job, opts: PodSpecOptions): V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: workspaceClaimName(job.pipeline_id),
      namespace: opts.namespace,
      labels: baseLabels(job.pipeline_id, opts),
      annotations: annotations(job),
      ...(opts.owner === undefined ? {} : { ownerReferences: [opts.owner] }),
    },
    spec: {
      accessModes: [opts.workspaceAccessMode],
      resources: { requests: { storage: opts.workspaceSize } },
      ...(opts.storageClass === undefined ? {} : { storageClassName: opts.storageClass }),
    },
  };
}

/** The init container's script: clone at the commit into `<workspaceDir>/src` unless already done. */
export function cloneInitScript(job: Job, workspaceDir: string): string {
  const src = `${workspaceDir}/src`;
  const marker = shellQuote(`${workspaceDir}/${CLONED_MARKER}`);
  return [
    'set -e',
    `mkdir -p ${shellQuote(`${workspaceDir}/home`)}`,
    `if [ -e ${marker} ]; then exit 0; fi`,
    `rm -rf ${shellQuote(src)} ${shellQuote(`${src}.fossil`)}`,
    `echo ${shellQuote(`cloning ${job.org}/${job.repo} at ${job.commit_node}`)}`,
    // `set -e` does not stop at a failure inside an `a && b` list: check the list's status.
    `(${cloneScript(job, src)}) || exit $?`,
    `touch ${marker}`,
  ].join('\n');
}

function containerSecurityContext(opts: PodSpecOptions): V1SecurityContext {
  return {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    runAsNonRoot: opts.runAsNonRoot,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

function podSecurityContext(opts: PodSpecOptions): V1PodSecurityContext {
  return {
    runAsNonRoot: opts.runAsNonRoot,
    seccompProfile: { type: 'RuntimeDefault' },
    ...(opts.runAsUser === undefined ? {} : { runAsUser: opts.runAsUser }),
    ...(opts.runAsGroup === undefined ? {} : { runAsGroup: opts.runAsGroup }),
    ...(opts.fsGroup === undefined ? {} : { fsGroup: opts.fsGroup }),
  };
}

function envList(env: Record<string, string>): V1EnvVar[] {
  return Object.entries(env).map(([name, value]) => ({ name, value }));
}

/**
 * One step as a Pod: an init container clones the repository into the workspace (first step only,
 * thanks to a marker file), then the step's image runs its commands with `sh -c` in the checkout.
 * `env` defaults to step.environment + job.ci_env (ci_env wins); HOME points into the workspace so
 * that tools find a writable home whatever user the image runs as (a step may override it).
 */
export function stepPod(
  job: Job,
  step: JobStep,
  opts: PodSpecOptions,
  suffix: string,
  env: Record<string, string> = { ...step.environment, ...job.ci_env },
): V1Pod {
  const ws = opts.workspaceDir;
  const mounts = [{ name: WORKSPACE_VOLUME, mountPath: ws }];
  const res = resources(opts);
  const stepRes = resources(opts, step);
  const sc = containerSecurityContext(opts);
  const clone: V1Container = {
    name: CLONE_CONTAINER,
    image: opts.cloneImage,
    command: ['sh', '-c', cloneInitScript(job, ws)],
    env: envList({
      HOME: `${ws}/home`,
      USER: 'triad',
      GIT_TERMINAL_PROMPT: '0',
      HGPLAIN: '1',
    }),
    workingDir: ws,
    volumeMounts: mounts,
    securityContext: sc,
    ...(res === undefined ? {} : { resources: res }),
  };
  const main: V1Container = {
    name: STEP_CONTAINER,
    image: step.image,
    command: ['sh', '-c', stepScript(step.commands)],
    env: envList({ HOME: `${ws}/home`, ...env }),
    workingDir: `${ws}/src`,
    volumeMounts: mounts,
    securityContext: sc,
    ...(stepRes === undefined ? {} : { resources: stepRes }),
  };
  const labels = { ...baseLabels(job.pipeline_id, opts), [LABEL_STEP]: String(step.number) };
  const pod: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: stepPodName(job.pipeline_id, step.number, suffix),
      namespace: opts.namespace,
      labels,
      annotations: { ...annotations(job), 'triad.dev/step-name': step.name },
      ...(opts.owner === undefined ? {} : { ownerReferences: [opts.owner] }),
    },
    spec: {
      restartPolicy: 'Never',
      // the agent stops a step at its timeout; the deadline is the backstop should the agent be gone
      activeDeadlineSeconds:
        step.timeout_seconds === undefined
          ? opts.deadlineSeconds
          : Math.min(opts.deadlineSeconds, step.timeout_seconds + 60),
      enableServiceLinks: false,
      ...(opts.serviceAccountName === undefined
        ? { automountServiceAccountToken: false }
        : { serviceAccountName: opts.serviceAccountName }),
      securityContext: podSecurityContext(opts),
      ...(Object.keys(opts.nodeSelector).length === 0 ? {} : { nodeSelector: { ...opts.nodeSelector } }),
      ...(opts.tolerations.length === 0 ? {} : { tolerations: opts.tolerations }),
      ...(opts.imagePullSecrets.length === 0
        ? {}
        : { imagePullSecrets: opts.imagePullSecrets.map((name) => ({ name })) }),
      initContainers: [clone],
      containers: [main],
      volumes: [
        {
          name: WORKSPACE_VOLUME,
          persistentVolumeClaim: { claimName: workspaceClaimName(job.pipeline_id) },
        },
      ],
    },
  };
  return keepStepResources(applyStepTemplate(pod, opts.stepTemplate), step, STEP_CONTAINER);
}

// ---- reading a step pod's status ----

export type PendingProblem = {
  reason: string;
  message: string;
  /** No point waiting: the pod can never start (e.g. an invalid image name). */
  fatal: boolean;
};

const WAITING_PROBLEMS = new Set([
  'ImagePullBackOff',
  'ErrImagePull',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CreateContainerConfigError',
  'CreateContainerError',
]);
const FATAL_PROBLEMS = new Set(['InvalidImageName', 'ErrImageNeverPull']);

/** Why a pending pod is not starting, when Kubernetes says so; undefined while it just waits. */
export function classifyPending(pod: V1Pod): PendingProblem | undefined {
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const cs of statuses) {
    const reason = cs.state?.waiting?.reason;
    if (reason !== undefined && WAITING_PROBLEMS.has(reason)) {
      const message = cs.state?.waiting?.message ?? '';
      return {
        reason,
        message: `container ${cs.name} (${cs.image}): ${message}`.replace(/: $/, ''),
        fatal: FATAL_PROBLEMS.has(reason),
      };
    }
  }
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable')
    return { reason: 'Unschedulable', message: scheduled.message ?? '', fatal: false };
  return undefined;
}

export type StepPodState =
  | { kind: 'pending'; problem: PendingProblem | undefined; cloning: boolean }
  | { kind: 'running' }
  | { kind: 'terminated'; exitCode: number; reason: string | undefined; message: string | undefined }
  | { kind: 'clone-failed'; exitCode: number; reason: string | undefined }
  | { kind: 'failed'; exitCode: number; reason: string; message: string };

/** Where a step pod is: waiting to start, running its step, or done (and how). */
export function stepPodState(pod: V1Pod): StepPodState {
  const status = pod.status;
  const main = status?.containerStatuses?.find((c) => c.name === STEP_CONTAINER);
  const clone = status?.initContainerStatuses?.find((c) => c.name === CLONE_CONTAINER);
  const podReason = status?.reason;
  if (main?.state?.terminated !== undefined) {
    const t = main.state.terminated;
    const reason = podReason === 'DeadlineExceeded' ? 'DeadlineExceeded' : t.reason;
    return {
      kind: 'terminated',
      exitCode: t.exitCode,
      reason: reason === 'Completed' || (reason === 'Error' && t.exitCode !== 0) ? undefined : reason,
      message: t.message,
    };
  }
  const cloneExit = clone?.state?.terminated?.exitCode;
  if (cloneExit !== undefined && cloneExit !== 0)
    return { kind: 'clone-failed', exitCode: cloneExit, reason: clone?.state?.terminated?.reason };
  if (status?.phase === 'Failed' || status?.phase === 'Succeeded') {
    const reason = podReason ?? (status.phase === 'Failed' ? 'PodFailed' : 'NoContainerStatus');
    return {
      kind: 'failed',
      exitCode: reason === 'DeadlineExceeded' ? EXIT_DEADLINE : EXIT_NOT_STARTED,
      reason,
      message: status.message ?? '',
    };
  }
  if (main?.state?.running !== undefined) return { kind: 'running' };
  return {
    kind: 'pending',
    problem: classifyPending(pod),
    cloning: clone?.state?.running !== undefined,
  };
}
