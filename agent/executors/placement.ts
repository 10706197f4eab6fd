/**
 * Where a pipeline's later step pods go: with a workspace volume that only one node can mount at a
 * time (ReadWriteOnce, ReadWriteOncePod), they follow the node the first step pod ran on, so the
 * volume stays attached there instead of being detached and attached again for every step (or
 * refused while still attached elsewhere: Multi-Attach). Pure functions; the executor applies them
 * to the pod stepPod() builds.
 */
import type { V1NodeSelectorTerm, V1Pod } from '@kubernetes/client-node';
import type { PodSpecOptions } from './pod-spec.ts';

/** Whether step pods of one pipeline must share the first step pod's node. */
export function followsFirstNode(accessMode: PodSpecOptions['workspaceAccessMode']): boolean {
  return accessMode !== 'ReadWriteMany';
}

/**
 * The pod with a required node affinity on `nodeName` (by the node's name, `metadata.name`, which
 * is exact whatever the node's labels), added to every term it already has: terms are ORed, the
 * expressions of one term ANDed, so the pod keeps its own rules and also lands on `nodeName`.
 * The pod given is not modified.
 */
export function pinToNode(pod: V1Pod, nodeName: string): V1Pod {
  const spec = pod.spec;
  if (spec === undefined) return pod;
  const pin = { key: 'metadata.name', operator: 'In', values: [nodeName] };
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const terms: V1NodeSelectorTerm[] =
    required === undefined || required.nodeSelectorTerms.length === 0
      ? [{ matchFields: [pin] }]
      : required.nodeSelectorTerms.map((t) => ({ ...t, matchFields: [...(t.matchFields ?? []), pin] }));
  return {
    ...pod,
    spec: {
      ...spec,
      affinity: {
        ...spec.affinity,
        nodeAffinity: {
          ...spec.affinity?.nodeAffinity,
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
        },
      },
    },
  };
}

/** The step pod placed after the pipeline's first step pod's node, when the access mode needs it. */
export function placeStep(
  pod: V1Pod,
  firstNode: string | undefined,
  accessMode: PodSpecOptions['workspaceAccessMode'],
): V1Pod {
  return firstNode !== undefined && followsFirstNode(accessMode) ? pinToNode(pod, firstNode) : pod;
}
