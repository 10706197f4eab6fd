/**
 * The AgentPool operator's reaction times on the test control plane (issue goals: p50 <= 2 s each):
 *  - pipeline queued -> agent replica requested: a pool of capacity 1 (min 0, max 50) gets one more
 *    pending pipeline per sample (a rerun); the time from the pipeline's `created_at` to the moment
 *    a watch sees the agents' Deployment ask for one more replica;
 *  - pipeline queued -> first step pod created, with a warm agent: a real `triad agent` process
 *    (kubernetes executor, the pool's labels) long-polls; the time from `created_at` to the watch
 *    event of the pipeline's first step pod.
 * Starts the control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok), a server
 * with embedded PostgreSQL, and `triad operator`, all as local processes.
 *
 *   npm run bench:operator [-- --samples 15]
 */
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { CustomObjectsApi, KubeConfig, Watch, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import { pushPipeline } from './lib/git.ts';
import { startBenchServer } from './lib/server.ts';
import { buildTools } from '../scripts/tools/build.ts';
import { toolPath } from '../scripts/tools/tools.ts';
import { startControlPlane } from '../test/k8s/harness/control-plane.ts';

const { values } = parseArgs({ options: { samples: { type: 'string', default: '15' } } });
const samples = Number(values.samples);
const ROOT = path.resolve(import.meta.dirname, '..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

await buildTools();
const plane = await startControlPlane();
const server = await startBenchServer('operator');
const running = server.running;
const dir = server.dir;
const admin = server.token;
const base = running.url;
const call = async (method: string, p: string, body?: unknown) => {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (r.status === 204 ? undefined : await r.json()) as Record<string, any>;
};
const kc = new KubeConfig();
kc.loadFromFile(plane.kubeconfig);
const kubectl = (...a: string[]) =>
  promisify(execFile)(toolPath('kubernetes', 'kubectl'), a, {
    env: { ...process.env, KUBECONFIG: plane.kubeconfig },
  });
const children: ReturnType<typeof spawn>[] = [];
const run = (cmd: string, env: Record<string, string>) => {
  const c = spawn(process.execPath, [path.join(ROOT, 'src', 'cli.ts'), cmd], {
    cwd: ROOT,
    env: { ...process.env, KUBECONFIG: plane.kubeconfig, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(c);
};

/** A git repository with a pipeline file of the pool's labels, pushed; its pipeline 1 is queued. */
async function repo(name: string, pool: string): Promise<void> {
  await call('POST', '/api/v1/orgs/bench/repos', { name, vcs: 'git' });
  const pipelineFile = `labels: {pool: ${pool}}\nsteps:\n  - name: s\n    image: alpine\n    commands: ["true"]\n`;
  await pushPipeline({
    base,
    token: admin,
    org: 'bench',
    repo: name,
    work: path.join(dir, name),
    pipelineFile,
  });
}

async function pool(name: string, spec: Record<string, unknown>): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'triad.dev',
    version: 'v1alpha1',
    plural: 'agentpools',
    namespace: 'bench',
    body: {
      apiVersion: 'triad.dev/v1alpha1',
      kind: 'AgentPool',
      metadata: { name },
      spec: { image: 'triad:test', ...spec },
    },
  });
}

const report = (what: string, xs: number[]) => {
  xs.sort((a, b) => a - b);
  const q = (p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))]!.toFixed(0);
  console.log(
    `${what} over ${xs.length} pipelines: p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${xs.at(-1)!.toFixed(0)} ms`,
  );
};

try {
  await kubectl(
    'apply',
    '--server-side',
    '-f',
    path.join(ROOT, 'charts', 'triad', 'crds', 'agentpools.triad.dev.yaml'),
  );
  await kubectl('wait', '--for=condition=Established', 'crd/agentpools.triad.dev');
  await kubectl('create', 'namespace', 'bench');
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  run('operator', {
    TRIAD_OPERATOR_SERVER: base,
    TRIAD_OPERATOR_TOKEN: admin,
    TRIAD_OPERATOR_NAMESPACE: 'bench',
    TRIAD_OPERATOR_WATCH_NAMESPACE: 'bench',
  });

  // ---- queued -> replica requested
  const replicasAt = new Map<number, number>();
  await new Watch(kc).watch(
    '/apis/apps/v1/namespaces/bench/deployments',
    {},
    (_t: string, d: V1Deployment) => {
      const n = d.spec?.replicas ?? 0;
      if (d.metadata?.name === 'cold-agent' && !replicasAt.has(n)) replicasAt.set(n, Date.now());
    },
    () => undefined,
  );
  await pool('cold', {
    minReplicas: 0,
    maxReplicas: 50,
    capacity: 1,
    scaleDownDelaySeconds: 3600,
    labels: { pool: 'cold' },
  });
  await repo('cold', 'cold');
  while (!replicasAt.has(1)) await sleep(50);
  const cold: number[] = [];
  for (let i = 2; i <= samples + 1; i++) {
    const p = await call('POST', '/api/v1/repos/bench/cold/pipelines/1/rerun');
    const queued = Date.parse(p.created_at as string);
    while (!replicasAt.has(i)) await sleep(10);
    cold.push(replicasAt.get(i)! - queued);
    await sleep(200);
  }
  report('queued -> agent replica requested', cold);

  // ---- queued -> first step pod, warm agent
  await pool('warm', { minReplicas: 1, maxReplicas: 1, capacity: 1, labels: { pool: 'warm' } });
  let token = '';
  while (token === '') {
    await sleep(200);
    const s = await kubectl(
      'get',
      'secret',
      'warm-agent-token',
      '-n',
      'bench',
      '-o',
      'jsonpath={.data.token}',
    ).catch(() => undefined);
    token = s === undefined ? '' : Buffer.from(s.stdout, 'base64').toString();
  }
  run('agent', {
    TRIAD_AGENT_SERVER: base,
    TRIAD_AGENT_TOKEN: token,
    TRIAD_AGENT_LABELS: 'pool=warm',
    TRIAD_AGENT_EXECUTOR: 'kubernetes',
    TRIAD_AGENT_INSTANCE: 'warm-agent-bench',
    TRIAD_AGENT_NAMESPACE: 'bench',
    TRIAD_AGENT_CLONE_IMAGE: 'triad:test',
    TRIAD_AGENT_POLL_WAIT: '30',
    TRIAD_AGENT_METRICS_PORT: 'off',
  });
  const podAt = new Map<string, number>();
  await new Watch(kc).watch(
    '/api/v1/namespaces/bench/pods',
    {},
    (type: string, pod: V1Pod) => {
      const id = pod.metadata?.labels?.['triad.dev/pipeline'];
      if (
        type === 'ADDED' &&
        id !== undefined &&
        pod.metadata?.labels?.['triad.dev/step'] === '1' &&
        !podAt.has(id)
      )
        podAt.set(id, Date.now());
    },
    () => undefined,
  );
  await repo('warm', 'warm');
  const finished = async (n: number) => {
    for (;;) {
      const p = await call('GET', `/api/v1/repos/bench/warm/pipelines/${n}`);
      if (!['pending', 'running'].includes(p.status as string)) return;
      await sleep(100);
    }
  };
  await finished(1);
  await sleep(1000);
  const warm: number[] = [];
  for (let i = 0; i < samples; i++) {
    const p = await call('POST', '/api/v1/repos/bench/warm/pipelines/1/rerun');
    const queued = Date.parse(p.created_at as string);
    while (!podAt.has(String(p.id))) await sleep(10);
    warm.push(podAt.get(String(p.id))! - queued);
    await finished(p.number as number);
    await sleep(500);
  }
  report('queued -> first step pod created (warm agent)', warm);
} finally {
  for (const c of children) c.kill('SIGKILL');
  await server.close();
  await plane.stop();
  process.exit(0);
}
