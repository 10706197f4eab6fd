import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import {
  isObject,
  ownedLabel,
  stepTemplateProblems,
  strategicMerge,
  type PodTemplate,
} from '../../agent/executors/pod-template.ts';

/**
 * AgentPool `spec.template`: labels, annotations and a strategic-merge pod spec patch for the agent
 * pods, applied after the pool's other fields. The operator owns the agent container's image,
 * command and args, the environment it sets, the service account and the labels its Deployment
 * selects with; `spec.stepTemplate` goes to the agents as TRIAD_AGENT_STEP_TEMPLATE.
 */

export const AGENT_CONTAINER = 'agent';
const OWNED_FIELDS = ['image', 'command', 'args'] as const;

/** Environment variables the operator sets itself (a template cannot set them). */
export function ownedEnvName(name: string): boolean {
  return name.startsWith('TRIAD_') || name === 'POD_NAME' || name === 'POD_NAMESPACE';
}

/** Why a pool's `spec.template` cannot be used (the CRD refuses the same; empty when fine). */
export function agentTemplateProblems(t: unknown): string[] {
  if (t === undefined) return [];
  if (!isObject(t)) return ['must be an object with metadata and spec'];
  const problems: string[] = [];
  const spec = t.spec;
  if (isObject(spec)) {
    if (spec.serviceAccountName !== undefined)
      problems.push(
        'cannot set serviceAccountName: the operator binds the agents to their own service account',
      );
    const agent = Array.isArray(spec.containers)
      ? (spec.containers as unknown[]).find((c) => isObject(c) && c.name === AGENT_CONTAINER)
      : undefined;
    if (isObject(agent)) {
      for (const f of OWNED_FIELDS)
        if (agent[f] !== undefined)
          problems.push(
            `cannot set the agent container's ${f}: the operator runs \`triad agent\` from spec.image`,
          );
      const env = Array.isArray(agent.env) ? agent.env : [];
      for (const e of env)
        if (isObject(e) && typeof e.name === 'string' && ownedEnvName(e.name))
          problems.push(`cannot set ${e.name} in the agent container: the operator sets it from the pool`);
    }
  }
  // The rest (fields besides metadata and spec, metadata's shape, owned labels): the step template's rules.
  return [...problems, ...stepTemplateProblems({ ...t, spec: undefined })];
}

/**
 * The agents' pod template with the pool's `spec.template` merged in; what the operator owns is put
 * back as it built it (the labels its Deployment selects with, the service account, the agent container's image, command,
 * args and its env variables named by ownedEnvName).
 */
export function applyAgentTemplate(base: V1PodTemplateSpec, t: PodTemplate | undefined): V1PodTemplateSpec {
  if (t === undefined) return base;
  const merged = strategicMerge(base, {
    metadata: t.metadata ?? {},
    spec: t.spec ?? {},
  }) as V1PodTemplateSpec;
  const labels = { ...merged.metadata?.labels };
  for (const [k, v] of Object.entries(base.metadata?.labels ?? {}))
    if (ownedLabel(k) || k === 'app.kubernetes.io/component') labels[k] = v;
  merged.metadata = { ...merged.metadata, labels };
  const spec = merged.spec!;
  if (base.spec!.serviceAccountName !== undefined) spec.serviceAccountName = base.spec!.serviceAccountName;
  const own = base.spec!.containers.find((c) => c.name === AGENT_CONTAINER)!;
  spec.containers = spec.containers.map((c) => {
    if (c.name !== AGENT_CONTAINER) return c;
    const out: Record<string, unknown> = { ...c };
    for (const f of OWNED_FIELDS) {
      if (own[f] === undefined) delete out[f];
      else out[f] = own[f];
    }
    const env = (c.env ?? []).filter((e) => !ownedEnvName(e.name));
    out.env = [...(own.env ?? []), ...env.filter((e) => !(own.env ?? []).some((o) => o.name === e.name))];
    return out as unknown as typeof c;
  });
  return merged;
}
