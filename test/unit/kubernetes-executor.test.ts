/**
 * The kubernetes executor against a small fake Kubernetes API server over real HTTP (node:http on
 * 127.0.0.1): just the endpoints the executor calls, with pods whose life each test scripts.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { KubernetesExecutor, kubernetesExecutorFromEnv } from '../../agent/executors/kubernetes.ts';
import { defaultPodSpecOptions } from '../../agent/executors/pod-spec.ts';
import type { Job, JobStep, StepResult } from '../../agent/types.ts';

type Json = Record<string, any>;
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One pod of the fake cluster; tests drive its status and log. */
class FakePod {
  status: Json = { phase: 'Pending' };
  log = Buffer.alloc(0);
  cloneLog = Buffer.alloc(0);
  followers = new Set<http.ServerResponse>();
  deleted = false;
  deleteOptions: Json = {};
  readonly body: Json;
  constructor(body: Json) {
    this.body = body;
  }
  get name(): string {
    return this.body.metadata.name;
  }
  get stepImage(): string {
    return this.body.spec.containers[0].image;
  }
  private cs(name: string, state: Json) {
    return {
      name,
      image: name === 'clone' ? 'triad-clone:latest' : this.stepImage,
      imageID: '',
      ready: false,
      restartCount: 0,
      state,
    };
  }
  waiting(reason: string, message: string, container: 'step' | 'clone' = 'step') {
    this.status = {
      phase: 'Pending',
      ...(container === 'clone'
        ? { initContainerStatuses: [this.cs('clone', { waiting: { reason, message } })] }
        : {
            initContainerStatuses: [this.cs('clone', { terminated: { exitCode: 0, reason: 'Completed' } })],
            containerStatuses: [this.cs('step', { waiting: { reason, message } })],
          }),
    };
  }
  unschedulable(message: string) {
    this.status = {
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }],
    };
  }
  cloning() {
    this.status = {
      phase: 'Pending',
      initContainerStatuses: [this.cs('clone', { running: { startedAt: new Date().toISOString() } })],
      containerStatuses: [this.cs('step', { waiting: { reason: 'PodInitializing' } })],
    };
  }
  cloneFailed(exitCode: number, log: string) {
    this.cloneLog = Buffer.from(log);
    this.status = {
      phase: 'Failed',
      initContainerStatuses: [this.cs('clone', { terminated: { exitCode, reason: 'Error' } })],
      containerStatuses: [this.cs('step', { waiting: { reason: 'PodInitializing' } })],
    };
  }
  run() {
    this.status = {
      phase: 'Running',
      initContainerStatuses: [this.cs('clone', { terminated: { exitCode: 0, reason: 'Completed' } })],
      containerStatuses: [this.cs('step', { running: { startedAt: new Date().toISOString() } })],
    };
  }
  /** Output of the step; `lossy` appends to the log without reaching the open follow streams. */
  write(s: string | Buffer, lossy = false) {
    const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
    this.log = Buffer.concat([this.log, b]);
    if (!lossy) for (const f of this.followers) f.write(b);
  }
  /** Ends the follow streams (the API server may do so while the container still runs). */
  endFollowers(abruptly = false) {
    for (const f of this.followers) {
      if (abruptly) f.destroy();
      else f.end();
    }
    this.followers.clear();
  }
  terminate(exitCode: number, reason = exitCode === 0 ? 'Completed' : 'Error', podReason?: string) {
    this.status = {
      phase: exitCode === 0 ? 'Succeeded' : 'Failed',
      ...(podReason === undefined ? {} : { reason: podReason }),
      initContainerStatuses: [this.cs('clone', { terminated: { exitCode: 0, reason: 'Completed' } })],
      containerStatuses: [this.cs('step', { terminated: { exitCode, reason } })],
    };
    this.endFollowers();
  }
  get mainStarted(): boolean {
    const s = (this.status.containerStatuses as Json[] | undefined)?.find((c) => c.name === 'step')?.state;
    return s?.running !== undefined || s?.terminated !== undefined;
  }
  get mainRunning(): boolean {
    const s = (this.status.containerStatuses as Json[] | undefined)?.find((c) => c.name === 'step')?.state;
    return s?.running !== undefined;
  }
}

function matches(labels: Json | undefined, selector: string | null): boolean {
  if (selector === null || selector === '') return true;
  return selector.split(',').every((kv) => {
    const [k, v] = kv.split('=');
    return labels?.[k!] === v;
  });
}

/** The fake API server: pods, pods/log and persistentvolumeclaims in namespaces. */
class FakeKube {
  pods = new Map<string, FakePod>();
  pvcs = new Map<string, Json>();
  requests: string[] = [];
  onPod: (p: FakePod) => void | Promise<void> = () => undefined;
  server = http.createServer((req, res) => {
    this.handle(req, res).catch((err: unknown) => {
      res.writeHead(500).end(String(err));
    });
  });
  url = '';

  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  async stop() {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
  reset() {
    for (const p of this.pods.values()) p.endFollowers(true);
    this.pods.clear();
    this.pvcs.clear();
    this.requests = [];
    this.onPod = () => undefined;
  }

  private send(res: http.ServerResponse, code: number, body: Json) {
    res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }
  private status(res: http.ServerResponse, code: number, reason: string, message: string) {
    this.send(res, code, { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message });
  }
  private async body(req: http.IncomingMessage): Promise<Json> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return chunks.length === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString());
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const u = new URL(req.url!, 'http://x');
    this.requests.push(`${req.method} ${u.pathname}${u.search}`);
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/(pods|persistentvolumeclaims)(?:\/([^/]+))?(\/log)?$/.exec(
      u.pathname,
    );
    if (m === null) return this.status(res, 404, 'NotFound', 'no route');
    const [, ns, kind, name, log] = m;
    const store = kind === 'pods' ? this.pods : this.pvcs;
    const key = `${ns}/${name}`;
    if (req.method === 'POST' && name === undefined) {
      const body = await this.body(req);
      const k = `${ns}/${body.metadata.name}`;
      if (store.has(k)) return this.status(res, 409, 'AlreadyExists', `${body.metadata.name} already exists`);
      body.metadata.uid = `uid-${body.metadata.name}`;
      if (kind === 'pods') {
        const p = new FakePod(body);
        this.pods.set(k, p);
        void Promise.resolve(this.onPod(p));
      } else this.pvcs.set(k, body);
      return this.send(res, 201, body);
    }
    if (req.method === 'GET' && name === undefined) {
      const selector = u.searchParams.get('labelSelector');
      const items = [...store.entries()]
        .filter(([k]) => k.startsWith(`${ns}/`))
        .map(([, v]) => (v instanceof FakePod ? { ...v.body, status: v.status } : v))
        .filter((o) => matches(o.metadata.labels, selector));
      return this.send(res, 200, { kind: 'List', apiVersion: 'v1', metadata: {}, items });
    }
    const found = store.get(key);
    if (found === undefined) return this.status(res, 404, 'NotFound', `${kind} "${name}" not found`);
    if (req.method === 'DELETE') {
      store.delete(key);
      if (found instanceof FakePod) {
        found.deleted = true;
        found.deleteOptions = Object.fromEntries(u.searchParams);
        const body = await this.body(req);
        Object.assign(found.deleteOptions, body);
        found.endFollowers();
        return this.send(res, 200, found.body);
      }
      return this.send(res, 200, found);
    }
    if (req.method === 'GET' && log !== undefined && found instanceof FakePod) {
      const container = u.searchParams.get('container');
      if (container === 'clone') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end(found.cloneLog);
        return;
      }
      if (!found.mainStarted)
        return this.status(
          res,
          400,
          'BadRequest',
          `container "step" in pod "${found.name}" is waiting to start`,
        );
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(found.log);
      if (u.searchParams.get('follow') === 'true' && found.mainRunning) found.followers.add(res);
      else res.end();
      return;
    }
    if (req.method === 'GET' && found instanceof FakePod)
      return this.send(res, 200, { ...found.body, status: found.status });
    if (req.method === 'GET') return this.send(res, 200, found);
    return this.status(res, 405, 'MethodNotAllowed', req.method ?? '');
  }
}

const kube = new FakeKube();
const warnings: string[] = [];

function executor(over: { pendingTimeoutMs?: number; instance?: string } = {}) {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: kube.url, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'fake-token' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'u' }],
    currentContext: 'fake',
  });
  return new KubernetesExecutor({
    kubeConfig: kc,
    pod: defaultPodSpecOptions({ namespace: 'ci', instance: over.instance ?? 'agent-0' }),
    pendingTimeoutMs: over.pendingTimeoutMs ?? 5000,
    pollMs: 20,
    warn: (m) => warnings.push(m),
  });
}

const job = (id = 42): Job => ({
  pipeline_id: id,
  number: 1,
  commit_node: 'abc',
  branch: 'main',
  tag: '',
  event: 'push',
  events: ['push'],
  clone_url: 'http://triad:3000/acme/w',
  clone_token: null,
  vcs: 'git',
  org: 'acme',
  repo: 'w',
  steps: [],
  ci_env: { CI: 'true' },
});
const step: JobStep = {
  id: 1,
  number: 1,
  name: 's',
  image: 'alpine:3',
  commands: ['echo hello'],
  environment: {},
  status: 'pending',
};

async function runStep(
  ex: KubernetesExecutor,
  signal = new AbortController().signal,
  j = job(),
): Promise<{ result: StepResult; output: string }> {
  const chunks: Buffer[] = [];
  const result = await ex.runStep({
    job: j,
    step,
    env: { ...step.environment, ...j.ci_env },
    onOutput: (d) => chunks.push(Buffer.from(d)),
    signal,
  });
  return { result, output: Buffer.concat(chunks).toString() };
}

beforeAll(() => kube.start());
afterAll(() => kube.stop());
beforeEach(() => {
  kube.reset();
  warnings.length = 0;
});

describe('kubernetes executor against a fake API server', () => {
  test('when prepared, then the workspace PVC exists; preparing again is fine', async () => {
    const ex = executor();
    await ex.prepare(job(), new AbortController().signal);
    const pvc = kube.pvcs.get('ci/triad-ws-42')!;
    expect(pvc.spec.resources.requests.storage).toBe('1Gi');
    expect(pvc.metadata.labels).toMatchObject({ 'triad.dev/pipeline': '42', 'triad.dev/agent': 'agent-0' });
    await ex.prepare(job(), new AbortController().signal);
  });

  test('when a step runs to exit 0, then its output is followed and the pod is deleted afterwards', async () => {
    let pod: FakePod | undefined;
    kube.onPod = async (p) => {
      pod = p;
      await delay(30);
      p.cloning();
      await delay(60);
      p.run();
      await delay(60);
      p.write('hel');
      p.write('lo\n');
      await delay(30);
      p.terminate(0);
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 0 });
    expect(output).toBe('hello\n');
    expect(pod!.name).toMatch(/^triad-p42-s1-[0-9a-f]{6}$/);
    expect(pod!.body.spec.containers[0].command).toEqual(['sh', '-c', 'set -e\necho hello']);
    expect(pod!.deleted).toBe(true);
    expect(kube.requests.some((r) => r.includes('/log?') && r.includes('follow=true'))).toBe(true);
  });

  test('when the step exits 3, then the exit code is 3', async () => {
    kube.onPod = async (p) => {
      p.run();
      await delay(50);
      p.write('failing\n');
      p.terminate(3);
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 3 });
    expect(output).toBe('failing\n');
  });

  test('when the follow stream misses the tail, then the final read emits it exactly once', async () => {
    kube.onPod = async (p) => {
      p.run();
      await delay(50);
      p.write('one\n');
      await delay(30);
      p.endFollowers(); // the API server closes the stream while the container runs: reopened
      await delay(80);
      p.write('two\n');
      await delay(30);
      p.write('three\ntail without newline', true); // never reaches the follow stream
      p.terminate(0);
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 0 });
    expect(output).toBe('one\ntwo\nthree\ntail without newline');
  });

  test('when the follow connection breaks, then nothing is lost and the agent does not crash', async () => {
    const big = Buffer.alloc(200_000, 'x');
    kube.onPod = async (p) => {
      p.run();
      await delay(50);
      p.write('start\n');
      await delay(30);
      p.endFollowers(true);
      p.write(big, true);
      await delay(60);
      p.write('end\n');
      await delay(30);
      p.terminate(1);
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 1 });
    // Compared without printing 200 kB on failure.
    const want = `start\n${big.toString()}end\n`;
    expect({ length: output.length, same: output === want }).toEqual({ length: want.length, same: true });
  });

  test('when the container is OOMKilled, then the result and the output say so', async () => {
    kube.onPod = async (p) => {
      p.run();
      await delay(40);
      p.write('allocating\n');
      p.terminate(137, 'OOMKilled');
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 137, reason: 'OOMKilled' });
    expect(output).toMatch(/^allocating\n\n\[triad\] .*OOMKilled/);
  });

  test('when the pod exceeds its deadline, then the reason is DeadlineExceeded', async () => {
    kube.onPod = async (p) => {
      p.run();
      await delay(40);
      p.terminate(137, 'Error', 'DeadlineExceeded');
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 137, reason: 'DeadlineExceeded' });
    expect(output).toContain('deadline of 3600 s');
  });

  test('when the image cannot be pulled, then after the pending timeout the step fails with 125 and the reason', async () => {
    let pod: FakePod | undefined;
    kube.onPod = (p) => {
      pod = p;
      p.waiting('ImagePullBackOff', 'Back-off pulling image "alpine:3"');
    };
    const t0 = Date.now();
    const { result, output } = await runStep(executor({ pendingTimeoutMs: 300 }));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(result).toEqual({ exitCode: 125, reason: 'ImagePullBackOff' });
    expect(output).toMatch(
      /did not start within \d+ s: ImagePullBackOff: container step \(alpine:3\): Back-off pulling/,
    );
    expect(pod!.deleted).toBe(true);
  });

  test('when the image name is invalid, then the step fails at once', async () => {
    kube.onPod = (p) => p.waiting('InvalidImageName', 'couldn\'t parse image name "UPPER"');
    // the pending timeout is far past the test's limit: only failing at once ends in time
    const { result } = await runStep(executor({ pendingTimeoutMs: 600_000 }));
    expect(result).toEqual({ exitCode: 125, reason: 'InvalidImageName' });
  });

  test('when the pod is unschedulable, then the step fails with Unschedulable and the scheduler message', async () => {
    kube.onPod = (p) => p.unschedulable('0/1 nodes are available: 1 Insufficient memory.');
    const { result, output } = await runStep(executor({ pendingTimeoutMs: 200 }));
    expect(result).toEqual({ exitCode: 125, reason: 'Unschedulable' });
    expect(output).toContain('Unschedulable: 0/1 nodes are available: 1 Insufficient memory.');
  });

  test('when the pod stays pending without a reason, then the timeout still fails the step', async () => {
    const { result, output } = await runStep(executor({ pendingTimeoutMs: 200 }));
    expect(result).toEqual({ exitCode: 125, reason: 'PendingTimeout' });
    expect(output).toContain(': Pending');
  });

  test('when cloning takes longer than the pending timeout, then the step still runs', async () => {
    kube.onPod = async (p) => {
      p.cloning();
      await delay(400);
      p.run();
      await delay(30);
      p.write('ok\n');
      p.terminate(0);
    };
    const { result, output } = await runStep(executor({ pendingTimeoutMs: 200 }));
    expect(result).toEqual({ exitCode: 0 });
    expect(output).toBe('ok\n');
  });

  test('when the clone fails, then its log and exit code are the step result', async () => {
    kube.onPod = async (p) => {
      p.cloning();
      await delay(40);
      p.cloneFailed(128, "fatal: repository 'http://triad:3000/acme/w/' not found\n");
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 128, reason: 'CloneFailed' });
    expect(output).toBe(
      "fatal: repository 'http://triad:3000/acme/w/' not found\n[triad] cloning the repository failed (exit code 128)\n",
    );
  });

  test('when the signal aborts a running step, then the pod is deleted at once and the step returns', async () => {
    let pod: FakePod | undefined;
    kube.onPod = async (p) => {
      pod = p;
      p.run();
      await delay(20);
      p.write('working\n');
    };
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    // the pod never ends by itself: only the abort ends the step
    const { result, output } = await runStep(executor(), ac.signal);
    expect(result).toEqual({ exitCode: 130, reason: 'cancelled' });
    expect(output).toBe('working\n');
    expect(pod!.deleted).toBe(true);
    expect(String(pod!.deleteOptions.gracePeriodSeconds)).toBe('0');
  });

  test('when the signal aborts a pending step, then it returns too', async () => {
    kube.onPod = (p) => p.waiting('ErrImagePull', 'pull failed');
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    // the pending timeout is far past the test's limit: only the abort ends the step in time
    const { result } = await runStep(executor({ pendingTimeoutMs: 600_000 }), ac.signal);
    expect(result.exitCode).toBe(130);
    expect(kube.pods.size).toBe(0);
  });

  test('when someone deletes the pod mid-step, then the step fails instead of hanging', async () => {
    kube.onPod = async (p) => {
      p.run();
      await delay(60);
      kube.pods.delete(`ci/${p.name}`);
      p.endFollowers();
    };
    const { result, output } = await runStep(executor());
    expect(result).toEqual({ exitCode: 125, reason: 'PodDeleted' });
    expect(output).toContain('was deleted');
  });

  test('when cleaning up, then only that pipeline’s pods and PVC go', async () => {
    const ex = executor();
    const hang = (p: FakePod) => p.waiting('ErrImagePull', 'x');
    kube.onPod = hang;
    for (const id of [1, 2]) {
      await ex.prepare(job(id), new AbortController().signal);
      const ac = new AbortController();
      // Leave a pod behind: abort the wait, but recreate the pod as if the delete had been lost.
      const p = runStep(ex, ac.signal, job(id));
      const mine = () =>
        [...kube.pods.values()].find((p) => p.body.metadata.labels['triad.dev/pipeline'] === String(id));
      while (mine() === undefined) await delay(10);
      const leftover = mine();
      ac.abort();
      await p;
      kube.pods.set(`ci/${leftover!.name}`, leftover!);
    }
    expect([...kube.pvcs.keys()].sort()).toEqual(['ci/triad-ws-1', 'ci/triad-ws-2']);
    await ex.cleanup(job(1));
    expect([...kube.pvcs.keys()]).toEqual(['ci/triad-ws-2']);
    expect([...kube.pods.values()].map((p) => p.body.metadata.labels['triad.dev/pipeline'])).toEqual(['2']);
  });

  test('when sweeping, then leftovers of inactive pipelines of this instance go, others stay', async () => {
    const mine = executor({ instance: 'agent-0' });
    const other = executor({ instance: 'agent-1' });
    for (const id of [1, 2, 3]) await mine.prepare(job(id), new AbortController().signal);
    await other.prepare(job(4), new AbortController().signal);
    // Leftovers of an earlier process of the same instance: made by a fresh executor object.
    const restarted = executor({ instance: 'agent-0' });
    await restarted.sweep(new Set([2]));
    expect([...kube.pvcs.keys()].sort()).toEqual(['ci/triad-ws-2', 'ci/triad-ws-4']);
    const otherRestarted = executor({ instance: 'agent-1' });
    await otherRestarted.sweep(new Set());
    expect([...kube.pvcs.keys()]).toEqual(['ci/triad-ws-2']);
    expect(kube.requests.filter((r) => r.startsWith('GET') && r.includes('labelSelector'))).not.toHaveLength(
      0,
    );
  });

  test('when a pipeline is prepared here but missing from the sweeper’s snapshot, then it is kept', async () => {
    const ex = executor();
    await ex.prepare(job(5), new AbortController().signal);
    await ex.sweep(new Set());
    expect([...kube.pvcs.keys()]).toEqual(['ci/triad-ws-5']);
    await ex.cleanup(job(5));
    expect(kube.pvcs.size).toBe(0);
  });

  test('when KUBECONFIG names a file, then the executor from the environment talks to that cluster', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-kubeconfig-'));
    try {
      const file = path.join(dir, 'config');
      await fs.writeFile(
        file,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters: [{name: fake, cluster: {server: "' + kube.url + '", insecure-skip-tls-verify: true}}]',
          'users: [{name: u, user: {token: t}}]',
          'contexts: [{name: fake, context: {cluster: fake, user: u}}]',
          'current-context: fake',
        ].join('\n'),
      );
      const ex = kubernetesExecutorFromEnv({
        KUBECONFIG: file,
        TRIAD_AGENT_NAMESPACE: 'ci',
        POD_NAME: 'agent-9',
      });
      expect(ex.namespace).toBe('ci');
      await ex.prepare(job(77), new AbortController().signal);
      expect(kube.pvcs.get('ci/triad-ws-77')?.metadata.labels['triad.dev/agent']).toBe('agent-9');
      expect(() => kubernetesExecutorFromEnv({ KUBECONFIG: path.join(dir, 'missing') })).toThrow(
        /cannot load the Kubernetes configuration/,
      );
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
