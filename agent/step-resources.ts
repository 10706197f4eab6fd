import type { ServerClient } from './client.ts';
import type { JobStep } from './types.ts';
import { aboveMaximum, type StepResources } from '../src/pipelines/quantity.ts';

export type { StepResources };

/**
 * The pool's maximum per step (`spec.steps.maxResources` of an AgentPool, given to its agents as
 * TRIAD_AGENT_MAX_CPU and TRIAD_AGENT_MAX_MEMORY): at claim, before anything of the pipeline runs,
 * each step asking for more gets a reason; the agent fails those steps and runs nothing.
 */
export function refusedSteps(steps: readonly JobStep[], max: StepResources): Map<number, string> {
  const refused = new Map<number, string>();
  for (const step of steps) {
    const why = step.resources === undefined ? undefined : aboveMaximum(step.name, step.resources, max);
    if (why !== undefined) refused.set(step.id, why);
  }
  return refused;
}

/** Reports a refused step: `failure` (no exit code: nothing ran) with the reason as its log. */
export async function reportRefused(
  api: ServerClient,
  step: JobStep,
  why: string,
  report: <T>(fn: () => Promise<T>) => Promise<T>,
): Promise<void> {
  const at = new Date().toISOString();
  await report(() => api.stepStatus(step.id, { status: 'running', started_at: at }));
  await report(() => api.appendLog(step.id, 0, Buffer.from(`[triad] ${why}: not run\n`)));
  await report(() =>
    api.stepStatus(step.id, { status: 'failure', started_at: at, finished_at: new Date().toISOString() }),
  );
}

/**
 * The maximum an agent applies: TRIAD_AGENT_MAX_* when set; otherwise what the executor would
 * have bounded a step by without the step's own resources, so that a pipeline file cannot lift
 * the limits its operator chose — the sandbox's memory for the local executor, the pool's CPU
 * and memory limits (TRIAD_AGENT_CPU_LIMIT / _MEMORY_LIMIT) for the kubernetes one. Unset
 * everywhere: unbounded.
 */
export function stepMaximum(
  kind: string,
  max: StepResources,
  fallback: {
    sandboxMemory?: string | undefined;
    cpuLimit?: string | undefined;
    memoryLimit?: string | undefined;
  },
): StepResources {
  const set = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v.trim());
  if (kind === 'local') return { cpu: max.cpu, memory: max.memory ?? set(fallback.sandboxMemory) };
  if (kind === 'kubernetes')
    return { cpu: max.cpu ?? set(fallback.cpuLimit), memory: max.memory ?? set(fallback.memoryLimit) };
  return max;
}
