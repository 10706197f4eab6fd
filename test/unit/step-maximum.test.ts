/**
 * The maximum an agent holds a step's `resources` to when TRIAD_AGENT_MAX_* are not set: what the
 * executor would have limited the step to, so that a pipeline file cannot lift its operator's
 * limits by asking for more.
 */
import { describe, expect, test } from '@jest/globals';
import { refusedSteps, stepMaximum } from '../../agent/step-resources.ts';
import type { JobStep } from '../../agent/types.ts';

const limits = { sandboxMemory: '4Gi', cpuLimit: '2', memoryLimit: '1Gi' };
const step = (resources: JobStep['resources']): JobStep => ({
  id: 1,
  number: 1,
  name: 'build',
  image: 'alpine',
  commands: ['make'],
  environment: {},
  status: 'pending',
  resources,
});

describe("an agent's maximum per step", () => {
  test('when TRIAD_AGENT_MAX_* are set, then they are the maximum whatever the executor', () => {
    for (const kind of ['local', 'kubernetes'])
      expect(stepMaximum(kind, { cpu: '8', memory: '16Gi' }, limits)).toEqual({ cpu: '8', memory: '16Gi' });
  });

  test('when they are not, then the kubernetes executor takes the pool limits and the local one its sandbox memory', () => {
    const k8s = stepMaximum('kubernetes', {}, limits);
    expect(k8s).toEqual({ cpu: '2', memory: '1Gi' });
    expect(refusedSteps([step({ memory: '2Gi' })], k8s).get(1)).toBe(
      "step build asks for memory 2Gi, above this pool's maximum 1Gi (spec.steps.maxResources)",
    );
    expect(refusedSteps([step({ memory: '1Gi', cpu: '2' })], k8s).size).toBe(0);
    expect(stepMaximum('local', {}, limits)).toEqual({ cpu: undefined, memory: '4Gi' });
    // no pool limits: unbounded
    expect(stepMaximum('kubernetes', {}, { cpuLimit: '', memoryLimit: undefined })).toEqual({
      cpu: undefined,
      memory: undefined,
    });
  });
});
