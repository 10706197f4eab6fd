/**
 * Pod templates: `metadata` (labels, annotations) plus a pod `spec` patch merged the way
 * Kubernetes' strategic merge patch merges pod specs. Used for step pods (AgentPool
 * `spec.stepTemplate`, chart `agent.steps.podTemplate`, TRIAD_AGENT_STEP_TEMPLATE) and for agent
 * pods (AgentPool `spec.template`). Pure functions: no I/O.
 *
 * Merge rules (those of `kubectl patch --type strategic` for the fields of a pod):
 * - maps merge key by key, recursively; a `null` value deletes the key;
 * - lists with a merge key merge item by item (an item whose key matches is merged into the
 *   existing one, others are appended): containers, initContainers, ephemeralContainers,
 *   volumes, imagePullSecrets, env, volumeMounts, ports, topologySpreadConstraints, ... (MERGE_KEYS);
 * - every other list (tolerations, args, command, ...) replaces the existing list.
 */
import type { V1Pod } from '@kubernetes/client-node';
// pod-spec.ts imports this module too: its constants are only read inside functions here.
import { CLONE_CONTAINER, LABEL_MANAGED_BY, STEP_CONTAINER, WORKSPACE_VOLUME } from './pod-spec.ts';

export type PodTemplate = {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
};

/** Field name -> the key that identifies an item of that list (Kubernetes' patchMergeKey). */
export const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  imagePullSecrets: 'name',
  env: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  ports: 'containerPort',
  topologySpreadConstraints: 'topologyKey',
  hostAliases: 'ip',
  resourceClaims: 'name',
  schedulingGates: 'name',
};

type Obj = Record<string, unknown>;

export function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function mergeList(base: unknown[], patch: unknown[], key: string): unknown[] {
  const out = [...base];
  for (const item of patch) {
    const k = isObject(item) ? item[key] : undefined;
    const i = k === undefined ? -1 : out.findIndex((b) => isObject(b) && b[key] === k);
    if (i >= 0) out[i] = strategicMerge(out[i], item);
    else out.push(strategicMerge(undefined, item));
  }
  return out;
}

/** `patch` merged into `base` (neither is modified); see the rules at the top of this file. */
export function strategicMerge(base: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return Array.isArray(patch) ? patch.map((p) => strategicMerge(undefined, p)) : patch;
  const out: Obj = isObject(base) ? { ...base } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) {
      delete out[k];
      continue;
    }
    const key = MERGE_KEYS[k];
    const current = out[k];
    if (key !== undefined && Array.isArray(v) && Array.isArray(current)) out[k] = mergeList(current, v, key);
    else out[k] = strategicMerge(current, v);
  }
  return out;
}

/** The label keys the executor sets on its objects (its sweeper and watches select with them). */
export function ownedLabel(key: string): boolean {
  return key === LABEL_MANAGED_BY || key.startsWith('triad.dev/');
}

const STEP_OWNED_CONTAINER_FIELDS = ['image', 'command', 'args', 'workingDir'] as const;
/** The reasons the AgentPool CRD gives too. */
const WHY_OWNED = {
  image: 'the pipeline file names it',
  command: "the executor runs the pipeline's commands",
  args: "the executor runs the pipeline's commands",
  workingDir: 'steps run in the checkout',
} as const;

function named(list: unknown, name: string): Obj | undefined {
  return Array.isArray(list)
    ? (list.find((c) => isObject(c) && c.name === name) as Obj | undefined)
    : undefined;
}

/**
 * Why a step template cannot be used: one message per field the executor owns (the same rules as
 * the AgentPool CRD's validations and the chart's values schema). Empty when it is fine.
 */
export function stepTemplateProblems(t: unknown): string[] {
  if (t === undefined) return [];
  if (!isObject(t)) return ['must be an object with metadata and spec'];
  const problems: string[] = [];
  for (const k of Object.keys(t))
    if (k !== 'metadata' && k !== 'spec') problems.push(`unknown field ${k} (only metadata and spec)`);
  const meta = t.metadata;
  if (meta !== undefined) {
    if (!isObject(meta)) problems.push('metadata must be an object');
    else
      for (const [k, v] of Object.entries(meta)) {
        if (k !== 'labels' && k !== 'annotations') {
          problems.push(`metadata.${k} cannot be set (only labels and annotations)`);
          continue;
        }
        if (!isObject(v) || Object.values(v).some((x) => typeof x !== 'string'))
          problems.push(`metadata.${k} must be a map of strings`);
        else if (k === 'labels')
          for (const l of Object.keys(v).filter(ownedLabel))
            problems.push(`metadata.labels cannot set ${l}: the executor selects its pods with it`);
      }
  }
  const spec = t.spec;
  if (spec === undefined) return problems;
  if (!isObject(spec)) return [...problems, 'spec must be an object'];
  if (spec.restartPolicy !== undefined)
    problems.push('spec cannot set restartPolicy: the executor runs each step once (Never)');
  const containers = spec.containers;
  if (containers !== undefined && !Array.isArray(containers)) problems.push('spec.containers must be a list');
  for (const c of Array.isArray(containers) ? containers : []) {
    if (!isObject(c) || c.name !== STEP_CONTAINER) {
      problems.push(
        `spec.containers may only patch the step container (name: ${STEP_CONTAINER}): a step pod ends when its containers end`,
      );
      continue;
    }
    for (const f of STEP_OWNED_CONTAINER_FIELDS)
      if (c[f] !== undefined) problems.push(`spec cannot set the step container's ${f}: ${WHY_OWNED[f]}`);
  }
  if (named(spec.initContainers, CLONE_CONTAINER) !== undefined)
    problems.push(
      `spec cannot change the ${CLONE_CONTAINER} init container: the executor clones the repository`,
    );
  if (named(spec.volumes, WORKSPACE_VOLUME) !== undefined)
    problems.push(`spec cannot change the ${WORKSPACE_VOLUME} volume: the executor owns the workspace`);
  return problems;
}

/**
 * A step pod with the template applied: after every field of the pool (node selector, tolerations,
 * resources, ...), then what the executor owns is put back as it built it (the step container's
 * image, command, args and working directory; the clone init container; the workspace volume and
 * its mounts; the restart policy; the name, namespace, owner and triad.dev labels).
 */
export function applyStepTemplate(pod: V1Pod, t: PodTemplate | undefined): V1Pod {
  if (t === undefined) return pod;
  const merged = strategicMerge(pod, { metadata: t.metadata ?? {}, spec: t.spec ?? {} }) as V1Pod;
  const meta = pod.metadata ?? {};
  const labels = { ...merged.metadata?.labels };
  for (const k of Object.keys(labels)) if (ownedLabel(k)) delete labels[k];
  for (const [k, v] of Object.entries(meta.labels ?? {})) if (ownedLabel(k)) labels[k] = v;
  merged.metadata = { ...merged.metadata, name: meta.name, namespace: meta.namespace, labels };
  if (meta.ownerReferences !== undefined) merged.metadata.ownerReferences = meta.ownerReferences;
  const base = pod.spec!;
  const spec = merged.spec!;
  spec.restartPolicy = base.restartPolicy;
  const workspace = base.volumes!.find((v) => v.name === WORKSPACE_VOLUME)!;
  spec.volumes = [workspace, ...(spec.volumes ?? []).filter((v) => v.name !== WORKSPACE_VOLUME)];
  const clone = base.initContainers!.find((c) => c.name === CLONE_CONTAINER)!;
  spec.initContainers = [clone, ...(spec.initContainers ?? []).filter((c) => c.name !== CLONE_CONTAINER)];
  const baseMain = base.containers.find((c) => c.name === STEP_CONTAINER)!;
  const wsMounts = baseMain.volumeMounts ?? [];
  spec.containers = spec.containers.map((c) => {
    if (c.name !== STEP_CONTAINER) return c;
    const mounts = (c.volumeMounts ?? []).filter(
      (m) => m.name !== WORKSPACE_VOLUME && !wsMounts.some((w) => w.mountPath === m.mountPath),
    );
    const owned = { ...c, volumeMounts: [...wsMounts, ...mounts] };
    for (const f of STEP_OWNED_CONTAINER_FIELDS) {
      if (baseMain[f] === undefined) delete owned[f];
      else (owned as Record<string, unknown>)[f] = baseMain[f];
    }
    return owned;
  });
  return merged;
}
