import { describe, expect, test } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import { parseKubernetesEnv } from '../../agent/executors/kubernetes-env.ts';
import { defaultPodSpecOptions, stepPod } from '../../agent/executors/pod-spec.ts';
import {
  stepTemplateProblems,
  strategicMerge,
  type PodTemplate,
} from '../../agent/executors/pod-template.ts';
import { testJob, testStep } from '../helpers/agent-jobs.ts';

const job = testJob(42, { number: 7, clone_token: null });
const step = testStep({ id: 9, number: 2, name: 'test', image: 'node:24', commands: ['npm test'] });

function pod(stepTemplate: PodTemplate | undefined, over = {}): V1Pod {
  return stepPod(
    job,
    step,
    defaultPodSpecOptions({
      namespace: 'ci',
      instance: 'agent-0',
      tolerations: [{ key: 'ci', operator: 'Exists' }],
      imagePullSecrets: ['from-settings'],
      nodeSelector: { pool: 'ci' },
      stepTemplate,
      ...over,
    }),
    'abc',
  );
}

describe('strategicMerge', () => {
  test('when maps are patched, then keys merge recursively and null deletes a key', () => {
    expect(strategicMerge({ a: { b: 1, c: 2 }, d: 3 }, { a: { c: 9, e: 4 }, d: null })).toEqual({
      a: { b: 1, c: 9, e: 4 },
    });
  });

  test('when lists with a merge key are patched, then matching items merge and new ones are appended', () => {
    const base = { containers: [{ name: 'step', image: 'x', env: [{ name: 'A', value: '1' }] }] };
    const patch = {
      containers: [
        {
          name: 'step',
          env: [
            { name: 'A', value: '2' },
            { name: 'B', value: '3' },
          ],
        },
        { name: 'side', image: 'y' },
      ],
    };
    expect(strategicMerge(base, patch)).toEqual({
      containers: [
        {
          name: 'step',
          image: 'x',
          env: [
            { name: 'A', value: '2' },
            { name: 'B', value: '3' },
          ],
        },
        { name: 'side', image: 'y' },
      ],
    });
  });

  test('when a list without a merge key is patched, then it is replaced, like kubectl patch does', () => {
    const merged = strategicMerge(
      { tolerations: [{ key: 'a' }], args: ['x'] },
      { tolerations: [{ key: 'b' }] },
    );
    expect(merged).toEqual({ tolerations: [{ key: 'b' }], args: ['x'] });
  });

  test('when merging, then neither input is modified', () => {
    const base = { spec: { volumes: [{ name: 'v' }] } };
    const patch = { spec: { volumes: [{ name: 'w' }] } };
    strategicMerge(base, patch);
    expect(base).toEqual({ spec: { volumes: [{ name: 'v' }] } });
    expect(patch).toEqual({ spec: { volumes: [{ name: 'w' }] } });
  });
});

describe('a step template applied to step pods', () => {
  const template: PodTemplate = {
    metadata: { labels: { team: 'web' }, annotations: { 'example.com/cost-center': 'ci' } },
    spec: {
      runtimeClassName: 'gvisor',
      priorityClassName: 'ci-low',
      tolerations: [{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }],
      imagePullSecrets: [{ name: 'registry' }],
      topologySpreadConstraints: [
        { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' },
      ],
      securityContext: { runAsUser: 2000 },
      volumes: [{ name: 'cache', emptyDir: {} }],
      containers: [
        {
          name: 'step',
          env: [{ name: 'CACHE', value: '/cache' }],
          volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
        },
      ],
    },
  };

  test('when a pool has a step template, then its fields land on the pod after the pool settings', () => {
    const p = pod(template);
    expect(p.metadata!.labels).toMatchObject({
      team: 'web',
      'triad.dev/pipeline': '42',
      'triad.dev/step': '2',
    });
    expect(p.metadata!.annotations).toMatchObject({
      'example.com/cost-center': 'ci',
      'triad.dev/step-name': 'test',
    });
    expect(p.spec!.runtimeClassName).toBe('gvisor');
    expect(p.spec!.priorityClassName).toBe('ci-low');
    // tolerations have no merge key: the template's list replaces the pool's
    expect(p.spec!.tolerations).toEqual([{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }]);
    expect(p.spec!.imagePullSecrets).toEqual([{ name: 'from-settings' }, { name: 'registry' }]);
    expect(p.spec!.nodeSelector).toEqual({ pool: 'ci' });
    expect(p.spec!.securityContext).toMatchObject({ runAsUser: 2000, runAsNonRoot: true });
    expect(p.spec!.volumes!.map((v) => v.name)).toEqual(['workspace', 'cache']);
    const main = p.spec!.containers[0]!;
    expect(main.volumeMounts).toEqual([
      { name: 'workspace', mountPath: '/workspace' },
      { name: 'cache', mountPath: '/cache' },
    ]);
    expect(main.env).toContainEqual({ name: 'CACHE', value: '/cache' });
    expect(main.command).toEqual(pod(undefined).spec!.containers[0]!.command);
  });

  test('when a template reaches for what the executor owns, then the executor still wins', () => {
    const plain = pod(undefined);
    const p = pod({
      metadata: { labels: { 'triad.dev/pipeline': '1', 'app.kubernetes.io/managed-by': 'me' } },
      spec: {
        restartPolicy: 'Always',
        containers: [{ name: 'step', command: ['sh', '-c', 'evil'], image: 'evil', workingDir: '/' }],
        initContainers: [{ name: 'clone', image: 'evil' }],
        volumes: [{ name: 'workspace', emptyDir: {} }],
      },
    });
    expect(p.metadata!.labels).toEqual(plain.metadata!.labels);
    expect(p.spec!.restartPolicy).toBe('Never');
    expect(p.spec!.containers).toEqual(plain.spec!.containers);
    expect(p.spec!.initContainers).toEqual(plain.spec!.initContainers);
    expect(p.spec!.volumes).toEqual(plain.spec!.volumes);
  });

  test('when there is no template, then the pod is the one built from the settings alone', () => {
    expect(pod(undefined)).toEqual(pod({}));
  });
});

describe('stepTemplateProblems', () => {
  test('when a template sets what the executor owns, then each field is named with the reason', () => {
    expect(
      stepTemplateProblems({
        metadata: { name: 'x', labels: { 'triad.dev/step': '1' } },
        spec: {
          restartPolicy: 'Always',
          containers: [{ name: 'step', command: ['x'], args: ['y'] }, { name: 'sidecar' }],
          initContainers: [{ name: 'clone' }],
          volumes: [{ name: 'workspace' }],
        },
      }),
    ).toEqual([
      'metadata.name cannot be set (only labels and annotations)',
      'metadata.labels cannot set triad.dev/step: the executor selects its pods with it',
      'spec cannot set restartPolicy: the executor runs each step once (Never)',
      "spec cannot set the step container's command: the executor runs the pipeline's commands",
      "spec cannot set the step container's args: the executor runs the pipeline's commands",
      'spec.containers may only patch the step container (name: step): a step pod ends when its containers end',
      'spec cannot change the clone init container: the executor clones the repository',
      'spec cannot change the workspace volume: the executor owns the workspace',
    ]);
  });

  test('when a template only adds scheduling and metadata, then it is fine', () => {
    expect(
      stepTemplateProblems({ metadata: { annotations: { a: 'b' } }, spec: { runtimeClassName: 'kata' } }),
    ).toEqual([]);
  });
});

describe('TRIAD_AGENT_STEP_TEMPLATE', () => {
  test('when it is set, then step pods get it', () => {
    const { options } = parseKubernetesEnv(
      { TRIAD_AGENT_STEP_TEMPLATE: '{"spec":{"runtimeClassName":"gvisor"}}', TRIAD_AGENT_NAMESPACE: 'ci' },
      '/nonexistent',
    );
    expect(options.pod.stepTemplate).toEqual({ spec: { runtimeClassName: 'gvisor' } });
  });

  test('when it overrides the command or is not JSON, then the agent refuses to start and says why', () => {
    const env = (v: string) => () => parseKubernetesEnv({ TRIAD_AGENT_STEP_TEMPLATE: v }, '/nonexistent');
    expect(env('{"spec":{"containers":[{"name":"step","command":["x"]}]}}')).toThrow(
      "TRIAD_AGENT_STEP_TEMPLATE: spec cannot set the step container's command",
    );
    expect(env('{spec')).toThrow('TRIAD_AGENT_STEP_TEMPLATE: must be JSON');
  });
});
