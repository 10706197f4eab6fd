import type { V1Pod, V1ResourceRequirements } from '@kubernetes/client-node';
import type { JobStep } from '../types.ts';

/** What the pool sets for its step pods' containers (see PodSpecOptions in pod-spec.ts). */
export type PoolResources = {
  requests: { cpu?: string | undefined; memory?: string | undefined };
  limits: { cpu?: string | undefined; memory?: string | undefined };
  /** `ephemeral-storage` request of the step container (its writable layer, logs); undefined = none. */
  ephemeralStorage?: string | undefined;
};

/**
 * A container's resources: the pool's requests and limits; for the step container (`step` given)
 * each key the step's `resources` names is both its request and its limit (the agent checked it
 * against the pool's maximum at claim), and the pool's `ephemeral-storage` request is added.
 */
export function containerResources(pool: PoolResources, step?: JobStep): V1ResourceRequirements | undefined {
  const own = step?.resources ?? {};
  const pick = (q: PoolResources['requests'], extra: Record<string, string> = {}) => {
    const r: Record<string, string> = {};
    const cpu = own.cpu ?? q.cpu;
    const memory = own.memory ?? q.memory;
    if (cpu !== undefined) r.cpu = cpu;
    if (memory !== undefined) r.memory = memory;
    Object.assign(r, extra);
    return Object.keys(r).length === 0 ? undefined : r;
  };
  const storage = step === undefined ? undefined : pool.ephemeralStorage;
  const requests = pick(pool.requests, storage === undefined ? {} : { 'ephemeral-storage': storage });
  const limits = pick(pool.limits);
  if (requests === undefined && limits === undefined) return undefined;
  return { ...(requests === undefined ? {} : { requests }), ...(limits === undefined ? {} : { limits }) };
}

/**
 * Puts the step's own `resources` back on the step container after a pod template was merged: what
 * the pipeline file asks for (bounded by the pool's maximum at claim) wins over the template's
 * defaults, key by key; the template's other keys (say `ephemeral-storage` limits) stay.
 */
export function keepStepResources<P extends V1Pod>(pod: P, step: JobStep, container: string): P {
  const own = step.resources ?? {};
  const keys = (['cpu', 'memory'] as const).filter((k) => own[k] !== undefined);
  if (keys.length === 0) return pod;
  for (const c of pod.spec?.containers ?? []) {
    if (c.name !== container) continue;
    const requests = { ...c.resources?.requests };
    const limits = { ...c.resources?.limits };
    for (const k of keys) requests[k] = limits[k] = own[k]!;
    c.resources = { ...c.resources, requests, limits };
  }
  return pod;
}
