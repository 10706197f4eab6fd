import type { CoreV1Api, V1ObjectMeta } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  LABEL_AGENT,
  LABEL_MANAGED_BY,
  LABEL_PIPELINE,
  MANAGED_BY,
  labelValue,
} from '../../agent/executors/pod-spec.ts';
import type { RegisteredAgent } from './triad-api.ts';
import { LABEL_POOL, MERGE, type AgentPool } from './types.ts';

/** Kubernetes' hint to a ReplicaSet scaling down: pods with a lower cost go first. */
export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

/**
 * Marks the pool's agent pods by the pipelines they run (pod-deletion-cost), so a scale-down
 * removes idle agents first; a busy agent that is still chosen drains on SIGTERM.
 */
export async function markBusyAgents(
  core: CoreV1Api,
  pool: AgentPool,
  agent: RegisteredAgent,
): Promise<void> {
  const ns = pool.metadata!.namespace!;
  const pods = await core.listNamespacedPod({
    namespace: ns,
    labelSelector: `${LABEL_POOL}=${pool.metadata!.name!},app.kubernetes.io/component=agent`,
  });
  for (const pod of pods.items) {
    const name = pod.metadata?.name ?? '';
    const busy = agent.instances.find((i) => i.name === name)?.running_pipelines.length ?? 0;
    const cost = String(busy * 1000);
    if ((pod.metadata?.annotations?.[DELETION_COST] ?? '0') === cost) continue;
    await core
      .patchNamespacedPod(
        { name, namespace: ns, body: { metadata: { annotations: { [DELETION_COST]: cost } } } },
        MERGE,
      )
      .catch(() => undefined); // gone meanwhile
  }
}

const olderThan = (m: V1ObjectMeta | undefined, ms: number, now: number) =>
  m?.creationTimestamp !== undefined && now - new Date(m.creationTimestamp).getTime() > ms;

/**
 * Whether a step pod or claim is a leftover of this agent: its agent label names exactly one of
 * the agent's own instances (a pool with the same name elsewhere, or one whose name starts like
 * this pool's, never matches), its pipeline no longer runs on the server, and it is older than
 * `graceMs`.
 */
export function isLeftover(
  m: V1ObjectMeta | undefined,
  agent: RegisteredAgent,
  graceMs: number,
  now = Date.now(),
): boolean {
  const mine = new Set(agent.instances.map((i) => labelValue(i.name)));
  const owner = m?.labels?.[LABEL_AGENT];
  return (
    owner !== undefined &&
    mine.has(owner) &&
    !agent.running_pipelines.map(String).includes(m?.labels?.[LABEL_PIPELINE] ?? '') &&
    olderThan(m, graceMs, now)
  );
}

/**
 * Deletes the step pods and workspace claims of the pool's agents whose pipeline no longer runs
 * on the server (an agent killed before its own cleanup). Objects younger than `graceMs` are
 * left alone: their pipeline may have been claimed after the server was asked.
 */
export async function sweepSteps(
  core: CoreV1Api,
  pool: AgentPool,
  namespace: string,
  agent: RegisteredAgent,
  graceMs: number,
  log: Logger,
): Promise<number> {
  const labelSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY},${LABEL_PIPELINE}`;
  const stale = (m: V1ObjectMeta | undefined) => isLeftover(m, agent, graceMs);
  let swept = 0;
  for (const pod of (await core.listNamespacedPod({ namespace, labelSelector })).items) {
    if (!stale(pod.metadata)) continue;
    await core
      .deleteNamespacedPod({ name: pod.metadata!.name!, namespace, gracePeriodSeconds: 0 })
      .catch(() => undefined);
    swept++;
  }
  for (const pvc of (await core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector })).items) {
    if (!stale(pvc.metadata)) continue;
    await core
      .deleteNamespacedPersistentVolumeClaim({ name: pvc.metadata!.name!, namespace })
      .catch(() => undefined);
    swept++;
  }
  if (swept > 0)
    log.info(
      { pool: `${pool.metadata!.namespace}/${pool.metadata!.name}`, swept },
      'swept leftovers of finished pipelines',
    );
  return swept;
}
