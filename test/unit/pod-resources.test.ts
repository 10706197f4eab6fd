import { describe, expect, test } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { defaultPodSpecOptions, stepPod } from '../../agent/executors/pod-spec.ts';
import { parseKubernetesEnv } from '../../agent/executors/kubernetes-env.ts';
import type { JobStep } from '../../agent/types.ts';
import { testJob, testStep } from '../helpers/agent-jobs.ts';

const job = testJob(42, { number: 7, clone_token: null, ci_env: {} });
const step = (resources?: JobStep['resources']): JobStep =>
  testStep({
    id: 9,
    number: 2,
    image: 'node:24',
    commands: ['make'],
    ...(resources === undefined ? {} : { resources }),
  });
const byName = (pod: V1Pod, name: string) =>
  [...pod.spec!.containers, ...(pod.spec!.initContainers ?? [])].find((c) => c.name === name)!;

describe("a step's resources on its pod", () => {
  const pool = defaultPodSpecOptions({
    requests: { cpu: '250m', memory: '256Mi' },
    limits: { cpu: '1', memory: '1Gi' },
  });

  test('each key the step names is its request and its limit; the pool gives the others; the clone keeps the pool’s', () => {
    const pod = stepPod(job, step({ memory: '3Gi' }), pool, 'a');
    expect(byName(pod, 'step').resources).toEqual({
      requests: { cpu: '250m', memory: '3Gi' },
      limits: { cpu: '1', memory: '3Gi' },
    });
    expect(byName(pod, 'clone').resources).toEqual({
      requests: { cpu: '250m', memory: '256Mi' },
      limits: { cpu: '1', memory: '1Gi' },
    });
    const both = stepPod(job, step({ cpu: '2', memory: '512Mi' }), defaultPodSpecOptions(), 'a');
    expect(byName(both, 'step').resources).toEqual({
      requests: { cpu: '2', memory: '512Mi' },
      limits: { cpu: '2', memory: '512Mi' },
    });
  });

  test('a step asking for nothing gets the pool’s, and none when the pool sets none', () => {
    expect(byName(stepPod(job, step(), pool, 'a'), 'step').resources).toEqual({
      requests: { cpu: '250m', memory: '256Mi' },
      limits: { cpu: '1', memory: '1Gi' },
    });
    expect(byName(stepPod(job, step(), defaultPodSpecOptions(), 'a'), 'step').resources).toBeUndefined();
  });

  test('TRIAD_AGENT_EPHEMERAL_STORAGE is an ephemeral-storage request of the step container only', () => {
    const { options } = parseKubernetesEnv({ TRIAD_AGENT_EPHEMERAL_STORAGE: '2Gi' }, '/nonexistent');
    const pod = stepPod(job, step({ cpu: '500m' }), options.pod, 'a');
    expect(byName(pod, 'step').resources).toEqual({
      requests: { cpu: '500m', 'ephemeral-storage': '2Gi' },
      limits: { cpu: '500m' },
    });
    expect(byName(pod, 'clone').resources).toBeUndefined();
    expect(() => parseKubernetesEnv({ TRIAD_AGENT_EPHEMERAL_STORAGE: 'lots' }, '/nonexistent')).toThrow(
      'TRIAD_AGENT_EPHEMERAL_STORAGE: must be a Kubernetes quantity such as 500m or 1Gi',
    );
  });

  test("a step template's resources on the step container give way to the step's own, key by key", () => {
    const templated = defaultPodSpecOptions({
      stepTemplate: {
        spec: {
          containers: [
            {
              name: 'step',
              resources: {
                requests: { cpu: '100m', memory: '128Mi' },
                limits: { memory: '512Mi', 'ephemeral-storage': '4Gi' },
              },
            },
          ],
        },
      },
    });
    expect(byName(stepPod(job, step({ memory: '2Gi' }), templated, 'a'), 'step').resources).toEqual({
      requests: { cpu: '100m', memory: '2Gi' },
      limits: { memory: '2Gi', 'ephemeral-storage': '4Gi' },
    });
    // without resources of its own the step keeps the template's
    expect(byName(stepPod(job, step(), templated, 'a'), 'step').resources).toEqual({
      requests: { cpu: '100m', memory: '128Mi' },
      limits: { memory: '512Mi', 'ephemeral-storage': '4Gi' },
    });
  });
});
