/**
 * API requests the `kubernetes` executor makes per step per minute, while steps run and while
 * they wait to be scheduled. Starts the test control plane (etcd, kube-apiserver,
 * controller-manager, scheduler, kwok fake nodes) as local processes and puts a counting HTTP
 * proxy between one executor and the API server: every request the executor opens (a read, a
 * list, a watch, a log stream) counts once, whatever it then streams.
 *
 *  - running: `--steps` steps of one pipeline each are held running (kwok's KWOK_STEP_HOLD) and the
 *    requests are counted over `--seconds` once all of them run;
 *  - pending: `--steps` steps whose node selector matches no node wait unscheduled (a pending
 *    timeout far above the window) and the requests are counted over `--seconds` once all exist.
 * The executor runs with its defaults (pollMs 1000).
 *
 *   npm run bench:executor-requests [-- --steps 5 --seconds 60]
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { KubernetesExecutor } from '../agent/executors/kubernetes.ts';
import { defaultPodSpecOptions, type PodSpecOptions } from '../agent/executors/pod-spec.ts';
import type { Job, StepResult } from '../agent/types.ts';
import { buildTools } from '../scripts/tools/build.ts';
import { startControlPlane, type ControlPlane } from '../test/k8s/harness/control-plane.ts';
import { testJob, testStep } from '../test/helpers/agent-jobs.ts';

const { values } = parseArgs({
  options: { steps: { type: 'string', default: '5' }, seconds: { type: 'string', default: '60' } },
});
const STEPS = Number(values.steps);
const SECONDS = Number(values.seconds);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A loopback HTTP proxy to the API server that counts requests by "METHOD kind" while counting. */
function countingProxy(plane: ControlPlane) {
  const target = new URL(plane.server);
  const ca = fs.readFileSync(plane.caFile);
  const agent = new https.Agent({ ca, keepAlive: true });
  const counts = new Map<string, number>();
  let counting = false;
  const kind = (method: string, url: string): string => {
    const u = new URL(url, 'http://x');
    const watch = u.searchParams.get('watch') === 'true' || u.searchParams.get('watch') === '1';
    const p = u.pathname.replace(/\/namespaces\/[^/]+/, '').replace(/^\/api\/v1\//, '');
    const [resource, name, sub] = p.split('/');
    const what = sub ?? (name === undefined ? (watch ? 'watch' : 'list') : 'item');
    return `${method} ${resource ?? p} ${what}`;
  };
  const server = http.createServer((req, res) => {
    if (counting) {
      const k = kind(req.method ?? 'GET', req.url ?? '/');
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    const up = https.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        agent,
        headers: { ...req.headers, host: target.host, authorization: `Bearer ${plane.adminToken}` },
      },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        res.flushHeaders(); // a watch answers its headers at once
        r.pipe(res);
        r.on('error', () => res.destroy());
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  return {
    server,
    counts,
    start: () => {
      counts.clear();
      counting = true;
    },
    stop: () => {
      counting = false;
      return new Map(counts);
    },
  };
}

await buildTools();
const plane = await startControlPlane();
const proxy = countingProxy(plane);
await new Promise<void>((r) => proxy.server.listen(0, '127.0.0.1', r));
const port = (proxy.server.address() as { port: number }).port;
const admin = new KubeConfig();
admin.loadFromFile(plane.kubeconfig);
const core = admin.makeApiClient(CoreV1Api);
const ns = 'bench-executor';
await core.createNamespace({ body: { metadata: { name: ns } } });
for (;;) {
  const ok = await core.readNamespacedServiceAccount({ name: 'default', namespace: ns }).then(
    () => true,
    () => false,
  );
  if (ok) break;
  await sleep(200);
}

const kc = new KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'proxy', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
  users: [{ name: 'proxy', token: 'replaced-by-the-proxy' }],
  contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy', namespace: ns }],
  currentContext: 'proxy',
});

let nextId = 1;
function job(): Job {
  nextId += 1;
  return testJob(nextId, { clone_url: 'http://triad.triad.svc:3000/bench/repo', org: 'bench', repo: 'repo' });
}
const step = testStep({ name: 'hold', commands: ['sleep 3600'], environment: { KWOK_STEP_HOLD: 'true' } });

type Phase = { name: string; perStepMinute: number; total: number; counts: Map<string, number> };

async function phase(name: string, over: Partial<PodSpecOptions>, ready: (p: string) => boolean) {
  const ex = new KubernetesExecutor({
    kubeConfig: kc,
    pod: defaultPodSpecOptions({
      namespace: ns,
      instance: `bench-${name}`,
      cloneImage: 'triad:bench',
      ...over,
    }),
    pendingTimeoutMs: 3_600_000,
    warn: (m, err) => console.error(`warn: ${m}: ${String(err)}`),
  });
  const ac = new AbortController();
  const jobs = Array.from({ length: STEPS }, () => job());
  for (const j of jobs) await ex.prepare(j, ac.signal);
  const runs: Promise<StepResult>[] = jobs.map((j) =>
    ex.runStep({ job: j, step, env: step.environment, onOutput: () => undefined, signal: ac.signal }),
  );
  for (;;) {
    const pods = await core.listNamespacedPod({
      namespace: ns,
      labelSelector: `triad.dev/agent=bench-${name}`,
    });
    const n = pods.items.filter(
      (p) => ready(p.status?.phase ?? '') && p.metadata?.deletionTimestamp === undefined,
    );
    if (n.length === STEPS) break;
    await sleep(500);
  }
  await sleep(3000); // past the start of every step (the first reads, the log follows opening)
  proxy.start();
  await sleep(SECONDS * 1000);
  const counts = proxy.stop();
  ac.abort();
  const results = await Promise.all(runs);
  for (const j of jobs) await ex.cleanup(j);
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const r: Phase = { name, total, counts, perStepMinute: total / STEPS / (SECONDS / 60) };
  console.log(
    `${name}: ${STEPS} steps, ${SECONDS} s: ${total} requests = ${r.perStepMinute.toFixed(1)} per step per minute` +
      ` (results: ${[...new Set(results.map((x) => x.reason ?? x.exitCode))].join(', ')})`,
  );
  for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1]))
    console.log(`  ${String(v).padStart(6)}  ${k}`);
  return r;
}

try {
  const running = await phase('running', {}, (p) => p === 'Running');
  const pending = await phase(
    'pending',
    { nodeSelector: { 'triad.bench/none': 'x' } },
    (p) => p === 'Pending',
  );
  console.log(
    `\n| machine | steps | window | running: requests/step/min | pending: requests/step/min |\n` +
      `| ${os.cpus().length} CPUs, Node ${process.version} | ${STEPS} | ${SECONDS} s | ` +
      `${running.perStepMinute.toFixed(1)} | ${pending.perStepMinute.toFixed(1)} |`,
  );
} finally {
  await sleep(6000); // the executors' watches end a few seconds after their last step
  proxy.server.closeAllConnections();
  proxy.server.close();
  await plane.stop();
}
