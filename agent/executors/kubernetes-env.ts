import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import type { KubernetesExecutorOptions } from './kubernetes.ts';
import { defaultPodSpecOptions } from './pod-spec.ts';
import { stepTemplateProblems, type PodTemplate } from './pod-template.ts';

/** The Kubernetes executor's configuration: its TRIAD_AGENT_* environment variables. */

export const SERVICEACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

const quantity = z
  .string()
  .regex(
    /^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$/,
    'must be a Kubernetes quantity such as 500m or 1Gi',
  )
  .optional();

const labelMap = z.string().transform((s, ctx): Record<string, string> => {
  const t = s.trim();
  if (t.startsWith('{')) {
    try {
      const parsed = z.record(z.string(), z.string()).safeParse(JSON.parse(t));
      if (parsed.success) return parsed.data;
    } catch {
      /* reported below */
    }
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object of strings or k=v,k=v' });
    return z.NEVER;
  }
  const out: Record<string, string> = {};
  for (const pair of t.split(',')) {
    if (pair.trim() === '') continue;
    const i = pair.indexOf('=');
    if (i <= 0) {
      ctx.addIssue({ code: 'custom', message: `"${pair}" is not k=v` });
      return z.NEVER;
    }
    out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  return out;
});

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const envSchema = z.object({
  TRIAD_AGENT_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a namespace name')
    .optional(),
  TRIAD_AGENT_PENDING_TIMEOUT: z.coerce.number().positive().default(120),
  TRIAD_AGENT_POD_DEADLINE_SECONDS: z.coerce.number().int().positive().default(3600),
  TRIAD_AGENT_CLONE_IMAGE: z.string().min(1).optional(),
  TRIAD_AGENT_WORKSPACE_SIZE: z
    .string()
    .regex(/^[0-9]+(\.[0-9]+)?(k|Ki|M|Mi|G|Gi|T|Ti)?$/, 'must be a quantity such as 1Gi')
    .default('1Gi'),
  TRIAD_AGENT_WORKSPACE_ACCESS_MODE: z
    .enum(['ReadWriteOnce', 'ReadWriteMany', 'ReadWriteOncePod'])
    .default('ReadWriteOnce'),
  TRIAD_AGENT_STORAGE_CLASS: z.string().min(1).optional(),
  TRIAD_AGENT_SERVICE_ACCOUNT: z.string().min(1).optional(),
  TRIAD_AGENT_NODE_SELECTOR: labelMap.optional(),
  TRIAD_AGENT_TOLERATIONS: z.string().optional(),
  TRIAD_AGENT_CPU_REQUEST: quantity,
  TRIAD_AGENT_CPU_LIMIT: quantity,
  TRIAD_AGENT_MEMORY_REQUEST: quantity,
  TRIAD_AGENT_MEMORY_LIMIT: quantity,
  /** `ephemeral-storage` request of each step container (unset: none). */
  TRIAD_AGENT_EPHEMERAL_STORAGE: quantity,
  TRIAD_AGENT_RUN_AS_USER: z.union([z.literal('image'), z.coerce.number().int().min(0)]).default(1000),
  TRIAD_AGENT_RUN_AS_NON_ROOT: bool.optional(),
  TRIAD_AGENT_FS_GROUP: z.union([z.literal('none'), z.coerce.number().int().min(0)]).optional(),
  TRIAD_AGENT_IMAGE_PULL_SECRETS: z.string().optional(),
  TRIAD_AGENT_STEP_TEMPLATE: z.string().optional(),
  TRIAD_AGENT_INSTANCE: z.string().min(1).optional(),
  POD_NAME: z.string().min(1).optional(),
  POD_NAMESPACE: z.string().min(1).optional(),
  KUBERNETES_SERVICE_HOST: z.string().min(1).optional(),
  KUBECONFIG: z.string().min(1).optional(),
});

const tolerationsSchema = z.array(
  z.object({
    key: z.string().optional(),
    operator: z.enum(['Exists', 'Equal']).optional(),
    value: z.string().optional(),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
    tolerationSeconds: z.number().int().optional(),
  }),
);

export type KubernetesEnv = {
  options: Omit<KubernetesExecutorOptions, 'kubeConfig'>;
  /** Whether to use the pod's service account (in a cluster, without KUBECONFIG). */
  inCluster: boolean;
  /** KUBECONFIG files (path-list), when set. */
  kubeconfigFiles: string[];
};

function readNamespaceFile(file: string): string | undefined {
  try {
    const ns = fs.readFileSync(file, 'utf8').trim();
    return ns === '' ? undefined : ns;
  } catch {
    return undefined;
  }
}

/** TRIAD_AGENT_STEP_TEMPLATE: JSON `{metadata, spec}`; what the executor owns is refused. */
function parseStepTemplate(raw: string | undefined, problems: string[]): PodTemplate | undefined {
  if (raw === undefined) return undefined;
  let t: unknown;
  try {
    t = JSON.parse(raw);
  } catch {
    problems.push('TRIAD_AGENT_STEP_TEMPLATE: must be JSON: {"metadata": {...}, "spec": {...}}');
    return undefined;
  }
  const found = stepTemplateProblems(t);
  for (const p of found) problems.push(`TRIAD_AGENT_STEP_TEMPLATE: ${p}`);
  return found.length === 0 ? (t as PodTemplate) : undefined;
}

/**
 * Parses the executor's TRIAD_AGENT_* variables (an empty variable counts as unset); a bad value
 * fails with every problem listed. Pure but for reading the service account's namespace file.
 */
export function parseKubernetesEnv(
  env: NodeJS.ProcessEnv,
  namespaceFile: string = SERVICEACCOUNT_NAMESPACE_FILE,
): KubernetesEnv {
  const present = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''),
  );
  const parsed = envSchema.safeParse(present);
  const problems = parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  let tolerations: z.infer<typeof tolerationsSchema> = [];
  if (parsed.success && parsed.data.TRIAD_AGENT_TOLERATIONS !== undefined) {
    try {
      const t = tolerationsSchema.safeParse(JSON.parse(parsed.data.TRIAD_AGENT_TOLERATIONS));
      if (t.success) tolerations = t.data;
      else problems.push('TRIAD_AGENT_TOLERATIONS: must be a JSON array of tolerations');
    } catch {
      problems.push('TRIAD_AGENT_TOLERATIONS: must be a JSON array of tolerations');
    }
  }
  const stepTemplate = parsed.success
    ? parseStepTemplate(parsed.data.TRIAD_AGENT_STEP_TEMPLATE, problems)
    : undefined;
  if (!parsed.success || problems.length > 0)
    throw new Error(`invalid kubernetes executor configuration: ${problems.join('; ')}`);
  const e = parsed.data;
  const agentNamespace = e.POD_NAMESPACE ?? readNamespaceFile(namespaceFile);
  const namespace = e.TRIAD_AGENT_NAMESPACE ?? agentNamespace ?? 'default';
  const runAsUser = e.TRIAD_AGENT_RUN_AS_USER === 'image' ? undefined : e.TRIAD_AGENT_RUN_AS_USER;
  const fsGroup =
    e.TRIAD_AGENT_FS_GROUP === 'none'
      ? undefined
      : (e.TRIAD_AGENT_FS_GROUP ?? (runAsUser === 0 ? undefined : runAsUser));
  const pod = defaultPodSpecOptions({
    namespace,
    cloneImage: e.TRIAD_AGENT_CLONE_IMAGE ?? defaultPodSpecOptions().cloneImage,
    workspaceSize: e.TRIAD_AGENT_WORKSPACE_SIZE,
    workspaceAccessMode: e.TRIAD_AGENT_WORKSPACE_ACCESS_MODE,
    storageClass: e.TRIAD_AGENT_STORAGE_CLASS,
    deadlineSeconds: e.TRIAD_AGENT_POD_DEADLINE_SECONDS,
    requests: { cpu: e.TRIAD_AGENT_CPU_REQUEST, memory: e.TRIAD_AGENT_MEMORY_REQUEST },
    limits: { cpu: e.TRIAD_AGENT_CPU_LIMIT, memory: e.TRIAD_AGENT_MEMORY_LIMIT },
    ephemeralStorage: e.TRIAD_AGENT_EPHEMERAL_STORAGE,
    nodeSelector: e.TRIAD_AGENT_NODE_SELECTOR ?? {},
    tolerations,
    serviceAccountName: e.TRIAD_AGENT_SERVICE_ACCOUNT,
    runAsUser,
    runAsGroup: runAsUser,
    fsGroup,
    runAsNonRoot: e.TRIAD_AGENT_RUN_AS_NON_ROOT ?? runAsUser !== 0,
    imagePullSecrets: (e.TRIAD_AGENT_IMAGE_PULL_SECRETS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    instance: e.TRIAD_AGENT_INSTANCE ?? e.POD_NAME ?? os.hostname(),
    stepTemplate,
  });
  const inCluster = e.KUBERNETES_SERVICE_HOST !== undefined && e.KUBECONFIG === undefined;
  return {
    inCluster,
    kubeconfigFiles: (e.KUBECONFIG ?? '').split(path.delimiter).filter((f) => f !== ''),
    options: {
      pod,
      pendingTimeoutMs: e.TRIAD_AGENT_PENDING_TIMEOUT * 1000,
      // Owner references only work within one namespace: a foreign owner would get the objects deleted.
      selfPod: e.POD_NAME !== undefined && agentNamespace === namespace ? e.POD_NAME : undefined,
    },
  };
}
