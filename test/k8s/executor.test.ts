/**
 * The agent's kubernetes executor against the real API server, as the chart's agent service
 * account (its Role and RoleBinding rendered from charts/triad and applied as they are), with
 * step pods on kwok nodes in a namespace that enforces the restricted Pod Security profile.
 * How the fake nodes "run" a step is set by test/k8s/kwok/stages.yaml (exit codes from the
 * KWOK_EXIT_CODE env, a held step with KWOK_STEP_HOLD, clone and image-pull failures by name).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { KubernetesExecutor } from '../../agent/executors/kubernetes.ts';
import { defaultPodSpecOptions, type PodSpecOptions } from '../../agent/executors/pod-spec.ts';
import type { Job, JobStep, StepResult } from '../../agent/types.ts';
import { PodRecorder, clients, cluster, kubectl, kubectlOk, objectsIn, waitFor } from './harness/kube.ts';
import { stepWorld, testJob, testStep, type StepWorld } from './harness/step-world.ts';

const INSTANCE = 'agent-a';
let w: StepWorld;
let ns: string;
let saKubeconfig: string;
let pods: PodRecorder;
const warnings: string[] = [];

beforeAll(async () => {
  // The chart's RBAC for the agent, exactly as rendered (ServiceAccount, Role, RoleBinding).
  w = await stepWorld('exec');
  ({ ns, pods, kubeconfig: saKubeconfig } = w);
});

afterAll(async () => {
  await w?.close();
});

let nextId = 1000;
function job(over: Partial<Job> = {}): Job {
  nextId += 1;
  return testJob(nextId, over);
}

const step = testStep;

function executor(
  over: Partial<PodSpecOptions> = {},
  pendingTimeoutMs = 3000,
  instance = INSTANCE,
): KubernetesExecutor {
  const kc = new KubeConfig();
  kc.loadFromFile(saKubeconfig);
  return new KubernetesExecutor({
    kubeConfig: kc,
    pod: defaultPodSpecOptions({ namespace: ns, instance, cloneImage: 'triad:test', ...over }),
    pendingTimeoutMs,
    pollMs: 200,
    warn: (m, err) => warnings.push(`${m}: ${String(err)}`),
  });
}

async function runStep(
  ex: KubernetesExecutor,
  j: Job,
  s: JobStep,
  signal = new AbortController().signal,
): Promise<{ result: StepResult; output: string; ms: number }> {
  const chunks: Buffer[] = [];
  const t0 = Date.now();
  const result = await ex.runStep({
    job: j,
    step: s,
    env: { ...s.environment, ...j.ci_env },
    onOutput: (d) => chunks.push(Buffer.from(d)),
    signal,
  });
  return { result, output: Buffer.concat(chunks).toString(), ms: Date.now() - t0 };
}

/** The one pod made for this pipeline's step (from the recorded watch). */
function podOf(j: Job, stepNumber = 1): string {
  const names = pods.names().filter((n) => n.startsWith(`triad-p${j.pipeline_id}-s${stepNumber}-`));
  expect(names).toHaveLength(1);
  return names[0]!;
}

async function leftovers(j?: Job): Promise<string[]> {
  const sel = `app.kubernetes.io/managed-by=triad-agent${j === undefined ? '' : `,triad.dev/pipeline=${j.pipeline_id}`}`;
  return objectsIn(ns, 'pods,persistentvolumeclaims', sel);
}

describe('kubernetes executor on a real API server with kwok nodes', () => {
  test('when the agent service account acts, then it is bound by the chart Role only', async () => {
    const can = async (args: string[]) =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: saKubeconfig })).stdout.trim();
    expect(await can(['create', 'pods', '-n', ns])).toBe('yes');
    expect(await can(['get', 'pods/log', '-n', ns])).toBe('yes');
    expect(await can(['watch', 'events', '-n', ns])).toBe('yes');
    expect(await can(['delete', 'persistentvolumeclaims', '-n', ns])).toBe('yes');
    expect(await can(['create', 'secrets', '-n', ns])).toBe('no');
    expect(await can(['create', 'pods', '-n', 'default'])).toBe('no');
    expect(await can(['list', 'nodes'])).toBe('no');
  });

  test('when a pipeline runs a step, then a bound workspace PVC, a clone init container and the step image run on a kwok node, exit 0 and the log', async () => {
    const ex = executor();
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    const { core } = clients();
    const claim = await core.readNamespacedPersistentVolumeClaim({
      name: `triad-ws-${j.pipeline_id}`,
      namespace: ns,
    });
    expect(claim.metadata?.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'triad-agent',
      'triad.dev/pipeline': String(j.pipeline_id),
      'triad.dev/agent': INSTANCE,
    });
    await waitFor('the workspace claim to be bound', async () => {
      const c = await core.readNamespacedPersistentVolumeClaim({
        name: `triad-ws-${j.pipeline_id}`,
        namespace: ns,
      });
      return c.status?.phase === 'Bound';
    });

    const { result, output } = await runStep(ex, j, step());
    expect(result).toEqual({ exitCode: 0 });
    expect(output).toBe(`${cluster().stepLogLine}\n`);

    const name = podOf(j);
    const pod = pods.first(name);
    expect(pod.spec?.containers.map((c) => [c.name, c.image])).toEqual([['step', 'alpine:3.20']]);
    expect(pod.spec?.containers[0]?.command).toEqual(['sh', '-c', 'set -e\necho hello']);
    const clone = pod.spec?.initContainers?.[0];
    expect(clone?.name).toBe('clone');
    expect(clone?.image).toBe('triad:test');
    expect(clone?.command?.[2]).toContain(
      `git clone -q --no-checkout 'http://ci:clone-token@triad.triad.svc:3000/acme/widgets'`,
    );
    expect(pod.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName).toBe(`triad-ws-${j.pipeline_id}`);
    // it went through the states a kubelet reports: scheduled on a fake node, cloning, then done
    expect(pods.some(name, (p) => cluster().nodes.includes(p.spec?.nodeName ?? ''))).toBe(true);
    expect(pods.some(name, (p) => p.status?.initContainerStatuses?.[0]?.state?.running !== undefined)).toBe(
      true,
    );
    expect(pods.some(name, (p) => p.status?.phase === 'Succeeded')).toBe(true);
    // the step's pod is deleted after the step; the workspace stays for the next step
    await waitFor('the step pod to be gone', async () =>
      (await leftovers(j)).every((o) => !o.startsWith('pod/')),
    );
    expect(await leftovers(j)).toEqual([`persistentvolumeclaim/triad-ws-${j.pipeline_id}`]);

    await ex.cleanup(j);
    await waitFor('nothing left of the pipeline', async () => (await leftovers(j)).length === 0);
  });

  test('when the step exits 3, then the exit code is 3', async () => {
    const ex = executor();
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    const { result, output } = await runStep(ex, j, step({ environment: { KWOK_EXIT_CODE: '3' } }));
    expect(result).toEqual({ exitCode: 3 });
    expect(output).toBe(`${cluster().stepLogLine}\n`);
    await ex.cleanup(j);
  });

  test('when the clone fails, then the clone log and its exit code are the step result', async () => {
    const ex = executor();
    const j = job({ clone_url: 'http://clone-fails.invalid/acme/widgets' });
    await ex.prepare(j, new AbortController().signal);
    const { result, output } = await runStep(ex, j, step());
    expect(result).toEqual({ exitCode: 128, reason: 'CloneFailed' });
    expect(output).toContain(cluster().cloneLogLine);
    expect(output).toContain('[triad] cloning the repository failed (exit code 128)');
    await ex.cleanup(j);
  });

  test('when the pipeline is cancelled while the step runs, then the pod is deleted at once and the step ends with 130', async () => {
    const ex = executor();
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    const ac = new AbortController();
    const running = runStep(ex, j, step({ environment: { KWOK_STEP_HOLD: 'true' } }), ac.signal);
    await waitFor('the step to run', () => {
      const names = pods.names().filter((n) => n.startsWith(`triad-p${j.pipeline_id}-`));
      return Promise.resolve(
        names.length === 1 && pods.some(names[0]!, (p) => p.status?.phase === 'Running'),
      );
    });
    // the step holds until it is stopped: only the abort ends it
    ac.abort();
    const { result } = await running;
    expect(result).toEqual({ exitCode: 130, reason: 'cancelled' });
    await waitFor(
      'the step pod to be gone',
      async () => (await leftovers(j)).every((o) => !o.startsWith('pod/')),
      10_000,
    );
    await ex.cleanup(j);
  });

  test('when no node matches the node selector, then the step fails with 125 Unschedulable and the scheduler message', async () => {
    const ex = executor({ nodeSelector: { 'triad.test/pool': 'gpu' } }, 2000);
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    const { result, output } = await runStep(ex, j, step());
    expect(result).toEqual({ exitCode: 125, reason: 'Unschedulable' });
    expect(output).toMatch(
      /did not start within \d+ s: Unschedulable: 0\/\d+ nodes are available: .*node affinity\/selector/,
    );
    await ex.cleanup(j);
    await waitFor('nothing left of the pipeline', async () => (await leftovers(j)).length === 0);
  });

  test('when the step image cannot be pulled, then the step fails with 125 ImagePullBackOff after the pending timeout', async () => {
    const ex = executor({}, 2000);
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    const { result, output, ms } = await runStep(ex, j, step({ image: 'unpullable.invalid/nothing:1' }));
    expect(result).toEqual({ exitCode: 125, reason: 'ImagePullBackOff' });
    expect(ms).toBeGreaterThanOrEqual(2000);
    expect(output).toContain(
      'ImagePullBackOff: container step (unpullable.invalid/nothing:1): Back-off pulling image',
    );
    await ex.cleanup(j);
  });

  test('when a running step passes its deadline, then it ends with DeadlineExceeded instead of waiting on the log', async () => {
    const ex = executor({ deadlineSeconds: 2 });
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    // the step holds until it is stopped: only the deadline ends it
    const { result, output } = await runStep(ex, j, step({ environment: { KWOK_STEP_HOLD: 'true' } }));
    expect(result).toEqual({ exitCode: 137, reason: 'DeadlineExceeded' });
    expect(output).toContain('[triad] the step exceeded its deadline of 2 s');
    await ex.cleanup(j);
  });

  test('when sweeping, then leftovers of this instance’s finished pipelines go and everything else stays', async () => {
    const mine = executor();
    const other = executor({}, 3000, 'agent-b');
    const [done, active, others] = [job(), job(), job()];
    for (const j of [done, active]) await mine.prepare(j, new AbortController().signal);
    await other.prepare(others, new AbortController().signal);
    // a pod left behind by a crashed run of `done`: held running, never cleaned up by its executor
    const ac = new AbortController();
    const held = runStep(executor(), done, step({ environment: { KWOK_STEP_HOLD: 'true' } }), ac.signal);
    await waitFor('the held step to run', () =>
      Promise.resolve(
        pods
          .names()
          .some(
            (n) =>
              n.startsWith(`triad-p${done.pipeline_id}-`) &&
              pods.some(n, (p) => p.status?.phase === 'Running'),
          ),
      ),
    );
    // a fresh executor of the same instance (the agent restarted) sweeps with `active` still running
    await executor().sweep(new Set([active.pipeline_id]));
    await waitFor(
      'the finished pipeline’s pod and PVC to be gone',
      async () => (await leftovers(done)).length === 0,
    );
    expect(await leftovers(active)).toEqual([`persistentvolumeclaim/triad-ws-${active.pipeline_id}`]);
    expect(await leftovers(others)).toEqual([`persistentvolumeclaim/triad-ws-${others.pipeline_id}`]);
    // the run that still followed the swept pod sees it go
    expect((await held).result).toEqual({ exitCode: 125, reason: 'PodDeleted' });
    ac.abort();
    await mine.cleanup(active);
    await other.cleanup(others);
    await waitFor('nothing left', async () => (await leftovers()).length === 0);
  });

  test('when every test is done, then no step pod, workspace claim or volume is left and nothing warned', async () => {
    await waitFor('no step pods or claims', async () => (await leftovers()).length === 0);
    await waitFor('the workspace volumes to be released and deleted', async () => {
      const pvs = await kubectlOk([
        'get',
        'pv',
        '-o',
        'jsonpath={range .items[*]}{.spec.claimRef.namespace}{"\\n"}{end}',
      ]);
      return !pvs.split('\n').includes(ns);
    });
    expect(warnings).toEqual([]);
  });
});
