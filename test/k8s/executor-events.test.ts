/**
 * What the kubernetes executor tells while a step pod waits (the pod's Events in the step log),
 * the pending timer standing still while an image is pulled, and later steps following the
 * first step's node with a ReadWriteOnce workspace: against the real API server and scheduler,
 * as the chart's agent service account, with kwok nodes (test/k8s/kwok/stages.yaml: a step image
 * under slowpull.invalid/ waits in ContainerCreating until the pod is annotated
 * triad.test/pulled=true).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { KubernetesExecutor } from '../../agent/executors/kubernetes.ts';
import { defaultPodSpecOptions, type PodSpecOptions } from '../../agent/executors/pod-spec.ts';
import type { Job, JobStep, StepResult } from '../../agent/types.ts';
import { PodRecorder, clients, cluster, kubectlOk, sleep, waitFor } from './harness/kube.ts';
import { stepWorld, testJob, testStep, type StepWorld } from './harness/step-world.ts';

let w: StepWorld;
let ns: string;
let pods: PodRecorder;
const warnings: string[] = [];

beforeAll(async () => {
  w = await stepWorld('exev');
  ({ ns, pods } = w);
});

afterAll(async () => {
  await w?.close();
});

let nextId = 2000;
function job(): Job {
  nextId += 1;
  return testJob(nextId);
}

const step = testStep;

function executor(over: Partial<PodSpecOptions> = {}, pendingTimeoutMs = 2000): KubernetesExecutor {
  return new KubernetesExecutor({
    kubeConfig: w.agentConfig(),
    pod: defaultPodSpecOptions({ namespace: ns, instance: 'agent-ev', cloneImage: 'triad:test', ...over }),
    pendingTimeoutMs,
    pollMs: 200,
    warn: (m, err) => warnings.push(`${m}: ${String(err)}`),
  });
}

type Run = { result: StepResult; output: () => string; ms: number };

/** Starts a step; `output()` is what the step log has so far, `done` its end. */
function start(ex: KubernetesExecutor, j: Job, s: JobStep): { output: () => string; done: Promise<Run> } {
  const chunks: Buffer[] = [];
  const output = () => Buffer.concat(chunks).toString();
  const t0 = Date.now();
  const done = ex
    .runStep({
      job: j,
      step: s,
      env: { ...s.environment, ...j.ci_env },
      onOutput: (d) => chunks.push(Buffer.from(d)),
      signal: new AbortController().signal,
    })
    .then((result) => ({ result, output, ms: Date.now() - t0 }));
  return { output, done };
}

/** The pipeline's pod of a step, once the recorded watch has seen it. */
async function podOf(j: Job, stepNumber: number): Promise<string> {
  let name = '';
  await waitFor(`the pod of step ${stepNumber}`, () => {
    name = pods.names().find((n) => n.startsWith(`triad-p${j.pipeline_id}-s${stepNumber}-`)) ?? '';
    return Promise.resolve(name !== '');
  });
  return name;
}

describe('kubernetes executor: why a pod waits, image pulls, workspace placement', () => {
  test('when no node can take the pod, then the step log has the scheduler’s FailedScheduling message and the step fails at the pending timeout', async () => {
    const ex = executor({ nodeSelector: { 'triad.test/pool': 'none' } }, 3000);
    const j = job();
    await ex.prepare(j, new AbortController().signal);
    // a bound workspace first, so that the scheduler's first word is about the node selector
    await waitFor('the workspace claim to be bound', async () => {
      const c = await clients().core.readNamespacedPersistentVolumeClaim({
        name: `triad-ws-${j.pipeline_id}`,
        namespace: ns,
      });
      return c.status?.phase === 'Bound';
    });
    const { result, output, ms } = await start(ex, j, step()).done;
    expect(result).toEqual({ exitCode: 125, reason: 'Unschedulable' });
    expect(ms).toBeGreaterThanOrEqual(3000);
    // the scheduler's Event, said once, before the executor's own conclusion
    const lines = output().split('\n');
    const said = lines.filter((l) => l.startsWith('[triad] FailedScheduling: '));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(
      /^\[triad\] FailedScheduling: 0\/\d+ nodes are available: .*node affinity\/selector/,
    );
    expect(lines.findIndex((l) => l.includes('did not start within'))).toBeGreaterThan(
      lines.indexOf(said[0]!),
    );
    await ex.cleanup(j);
  });

  test('when the step image is being pulled, then the pending timer stands still and the step runs once the pull ends', async () => {
    const image = 'slowpull.invalid/tool:1';
    // without the kubelet's Pulling Event, the same wait fails at the pending timeout
    const ex = executor();
    const before = job();
    await ex.prepare(before, new AbortController().signal);
    const timedOut = await start(ex, before, step({ image })).done;
    expect(timedOut.result).toEqual({ exitCode: 125, reason: 'PendingTimeout' });
    await ex.cleanup(before);

    const j = job();
    await ex.prepare(j, new AbortController().signal);
    const run = start(ex, j, step({ image }));
    const name = await podOf(j, 1);
    await waitFor('the step container to wait for its image', () =>
      Promise.resolve(
        pods.some(
          name,
          (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ContainerCreating',
        ),
      ),
    );
    const { core } = clients();
    const pod = pods.first(name);
    const now = new Date();
    await core.createNamespacedEvent({
      namespace: ns,
      body: {
        metadata: { name: `${name}.pulling`, namespace: ns },
        involvedObject: { kind: 'Pod', apiVersion: 'v1', name, namespace: ns, uid: pod.metadata?.uid ?? '' },
        reason: 'Pulling',
        message: `Pulling image "${image}"`,
        type: 'Normal',
        source: { component: 'kubelet', host: pod.spec?.nodeName ?? '' },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
    // twice the pending timeout: still waiting, and the log says why
    let ended = false;
    void run.done.then(() => (ended = true));
    await sleep(4000);
    expect(ended).toBe(false);
    expect(run.output()).toContain(`[triad] Pulling: Pulling image "${image}"\n`);
    await kubectlOk(['annotate', 'pod', name, '-n', ns, 'triad.test/pulled=true']);
    const { result, output } = await run.done;
    expect(result).toEqual({ exitCode: 0 });
    expect(output()).toContain(`${cluster().stepLogLine}\n`);
    await ex.cleanup(j);
  });

  test('when the workspace is ReadWriteOnce, then later steps are pinned to the first step’s node; with ReadWriteMany they are not', async () => {
    for (const mode of ['ReadWriteOnce', 'ReadWriteMany'] as const) {
      const ex = executor({ workspaceAccessMode: mode });
      const j = job();
      await ex.prepare(j, new AbortController().signal);
      expect((await start(ex, j, step({ number: 1 })).done).result).toEqual({ exitCode: 0 });
      expect((await start(ex, j, step({ number: 2, name: 'test' })).done).result).toEqual({ exitCode: 0 });
      const first = await podOf(j, 1);
      const second = await podOf(j, 2);
      const nodeOf = (n: string) => pods.seen.get(n)?.find((p) => p.spec?.nodeName)?.spec?.nodeName;
      const node = nodeOf(first);
      expect(cluster().nodes).toContain(node);
      const affinity = pods.first(second).spec?.affinity;
      if (mode === 'ReadWriteOnce') {
        expect(
          affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms,
        ).toEqual([{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [node] }] }]);
        expect(nodeOf(second)).toBe(node);
      } else {
        expect(affinity).toBeUndefined();
      }
      expect(pods.first(first).spec?.affinity).toBeUndefined();
      await ex.cleanup(j);
    }
  });

  test('when every test is done, then nothing warned', () => {
    expect(warnings).toEqual([]);
  });
});
