/**
 * A real Kubernetes control plane on loopback for the tests: etcd, kube-apiserver,
 * kube-controller-manager, kube-scheduler and kwok (fake nodes whose pods "run" through the stages
 * in test/k8s/kwok/stages.yaml). Binaries come from the tools cache (scripts/tools/tools.ts).
 *
 * Everything lives in one temporary directory (etcd data, keys, kubeconfig, process logs) that
 * `stop()` removes after stopping every process. Nothing listens beyond 127.0.0.1.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { requireTools, toolPath } from '../../../scripts/tools/tools.ts';
import { ProcessGroup, STATE_PREFIX, reapStale, tail, type Proc } from './processes.ts';

export type ControlPlaneInfo = {
  /** The state directory (process logs are `<name>.log` here). */
  dir: string;
  /** Admin kubeconfig (a static token in group system:masters). */
  kubeconfig: string;
  server: string;
  /** CA bundle that verifies the API server's serving certificate. */
  caFile: string;
  adminToken: string;
  nodes: string[];
  /** The fixed log lines kwok serves for the step and clone containers. */
  stepLogLine: string;
  cloneLogLine: string;
  /** The node label every fake node has (`triad.test/pool: kwok`). */
  nodeLabel: { key: string; value: string };
};

export type ControlPlane = ControlPlaneInfo & { stop: () => Promise<void> };

export const STEP_LOG_LINE = 'step output from a kwok node';
export const CLONE_LOG_LINE = "fatal: unable to access 'http://clone-fails.invalid/': Could not resolve host";
const STAGES_FILE = path.join(import.meta.dirname, '..', 'kwok', 'stages.yaml');
const SERVICE_CIDR = '10.96.0.0/16';
const KWOK_ANNOTATION = 'kwok.x-k8s.io/node';

const say = (msg: string) => process.stderr.write(`[k8s] ${msg}\n`);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns true; fails with `what` and the process log when `proc` dies or time runs out. */
async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  proc: Proc,
  timeoutMs: number,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode() !== undefined)
      throw new Error(
        `${proc.name} exited (${proc.exitCode()}) while waiting for ${what}:\n${tail(proc.logFile)}`,
      );
    if (await check().catch(() => false)) return;
    if (Date.now() > until)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; ${proc.name} log:\n${tail(proc.logFile)}`,
      );
    await sleep(200);
  }
}

async function httpGet(
  url: string,
  opts: { ca?: Buffer; token?: string } = {},
): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> =
    opts.token === undefined ? {} : { authorization: `Bearer ${opts.token}` };
  if (url.startsWith('http:')) {
    const r = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
    return { status: r.status, body: await r.text() };
  }
  return new Promise((resolve, reject) => {
    const req = https.get(url, { headers, ca: opts.ca, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

function kubeconfigYaml(server: string, caFile: string, token: string, user = 'admin'): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: triad-test`,
    `  cluster: {server: ${JSON.stringify(server)}, certificate-authority: ${JSON.stringify(caFile)}}`,
    'users:',
    `- name: ${user}`,
    `  user: {token: ${JSON.stringify(token)}}`,
    'contexts:',
    `- name: triad-test`,
    `  context: {cluster: triad-test, user: ${user}, namespace: default}`,
    'current-context: triad-test',
    '',
  ].join('\n');
}

/** A kubeconfig for another identity (for example a service account token) on the same cluster. */
export function writeKubeconfig(
  info: ControlPlaneInfo,
  file: string,
  token: string,
  namespace = 'default',
): string {
  fs.writeFileSync(
    file,
    kubeconfigYaml(info.server, info.caFile, token, 'user').replace(
      'namespace: default',
      `namespace: ${namespace}`,
    ),
    {
      mode: 0o600,
    },
  );
  return file;
}

function kwokConfig(dir: string, port: number): string {
  const stepLog = path.join(dir, 'kwok-step.log');
  const cloneLog = path.join(dir, 'kwok-clone.log');
  // CRI log format: <RFC3339Nano> <stream> <F=full line> <text>
  fs.writeFileSync(stepLog, `2026-01-01T00:00:00.000000000Z stdout F ${STEP_LOG_LINE}\n`);
  fs.writeFileSync(
    cloneLog,
    `2026-01-01T00:00:00.000000000Z stdout F cloning\n2026-01-01T00:00:00.100000000Z stderr F ${CLONE_LOG_LINE}\n`,
  );
  const logs = [
    'apiVersion: kwok.x-k8s.io/v1alpha1',
    'kind: ClusterLogs',
    'metadata: {name: triad-test-logs}',
    'spec:',
    '  logs:',
    `  - {containers: [clone], logsFile: ${JSON.stringify(cloneLog)}}`,
    `  - {containers: [step], logsFile: ${JSON.stringify(stepLog)}}`,
    `  - {logsFile: ${JSON.stringify(stepLog)}}`,
  ].join('\n');
  const options = [
    'apiVersion: config.kwok.x-k8s.io/v1alpha1',
    'kind: KwokConfiguration',
    'options:',
    `  nodeIP: 127.0.0.1`,
    `  nodePort: ${port}`,
    `  serverAddress: 127.0.0.1:${port}`,
    `  cidr: 10.244.0.1/16`,
    `  manageNodesWithAnnotationSelector: ${KWOK_ANNOTATION}=fake`,
    `  nodeLeaseDurationSeconds: 40`,
    // kwok's defaults are not applied to a configuration file: spell them out
    `  nodeLeaseParallelism: 4`,
    `  podPlayStageParallelism: 4`,
    `  nodePlayStageParallelism: 4`,
    `  podsOnNodeSyncParallelism: 4`,
    `  enableDebuggingHandlers: true`,
    `  enableProfilingHandler: false`,
    `  enableContentionProfiling: false`,
    `  enablePodsOnNodeSyncListPager: true`,
    `  enablePodsOnNodeSyncStreamWatch: false`,
  ].join('\n');
  const file = path.join(dir, 'kwok.yaml');
  fs.writeFileSync(file, `${options}\n---\n${fs.readFileSync(STAGES_FILE, 'utf8')}\n---\n${logs}\n`);
  return file;
}

export type StartOptions = { nodes?: number };

export async function startControlPlane(opts: StartOptions = {}): Promise<ControlPlane> {
  requireTools(['kubernetes', 'etcd', 'kwok']);
  for (const d of reapStale()) say(`removed the leftovers of an earlier run: ${d}`);
  const t0 = Date.now();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), STATE_PREFIX));
  const group = new ProcessGroup(dir);
  const stop = async () => {
    await group.stopAll((name) => (name === 'kube-apiserver' ? 3000 : 5000));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const info = await boot(dir, group, opts.nodes ?? 2);
    say(`control plane ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (${dir})`);
    return { ...info, stop };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

async function boot(dir: string, group: ProcessGroup, nodeCount: number): Promise<ControlPlaneInfo> {
  const [etcdPort, peerPort, apiPort, kwokPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const adminToken = randomBytes(24).toString('hex');
  fs.writeFileSync(
    path.join(dir, 'tokens.csv'),
    `${adminToken},triad-test-admin,triad-test-admin,"system:masters"\n`,
    {
      mode: 0o600,
    },
  );
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  fs.writeFileSync(path.join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), {
    mode: 0o600,
  });
  fs.writeFileSync(path.join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

  // etcd
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const etcd = group.start('etcd', toolPath('etcd'), [
    '--name=triad-test',
    `--data-dir=${path.join(dir, 'etcd')}`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=triad-test=${peerUrl}`,
    '--unsafe-no-fsync=true',
    '--log-level=warn',
  ]);
  await waitUntil(
    'etcd health',
    async () => (await httpGet(`${etcdUrl}/health`)).body.includes('true'),
    etcd,
    30_000,
  );

  // kube-apiserver (it writes a self-signed serving certificate and its CA into --cert-dir)
  const pki = path.join(dir, 'pki');
  const server = `https://127.0.0.1:${apiPort}`;
  const api = group.start('kube-apiserver', toolPath('kubernetes', 'kube-apiserver'), [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${apiPort}`,
    `--cert-dir=${pki}`,
    `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
    '--anonymous-auth=false',
    '--authorization-mode=RBAC',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
    `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    '--allow-privileged=true',
    // The "kubernetes" Service's endpoints would be the loopback address, which is refused.
    '--endpoint-reconciler-type=none',
    // kubectl logs: reach kwok's kubelet endpoint by the node's InternalIP (no DNS lookups).
    '--kubelet-preferred-address-types=InternalIP',
    '--profiling=false',
    '--v=0',
  ]);
  const caFile = path.join(pki, 'apiserver.crt');
  await waitUntil(
    'kube-apiserver /readyz',
    async () => {
      if (!fs.existsSync(caFile)) return false;
      const r = await httpGet(`${server}/readyz`, { ca: fs.readFileSync(caFile), token: adminToken });
      return r.status === 200;
    },
    api,
    90_000,
  );
  const kubeconfig = path.join(dir, 'kubeconfig');
  fs.writeFileSync(kubeconfig, kubeconfigYaml(server, caFile, adminToken), { mode: 0o600 });

  // controllers, scheduler, kwok
  group.start('kube-controller-manager', toolPath('kubernetes', 'kube-controller-manager'), [
    `--kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--secure-port=0',
    '--authentication-skip-lookup',
    `--service-account-private-key-file=${path.join(dir, 'sa.key')}`,
    `--root-ca-file=${caFile}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    // No node lifecycle (fake nodes stay as kwok reports them) and no HPA (no metrics server).
    '--controllers=*,-node-lifecycle-controller,-horizontal-pod-autoscaler-controller',
    '--concurrent-gc-syncs=5',
    '--v=0',
  ]);
  group.start('kube-scheduler', toolPath('kubernetes', 'kube-scheduler'), [
    `--kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--secure-port=0',
    '--authentication-skip-lookup',
    '--v=0',
  ]);
  const kwok = group.start('kwok', toolPath('kwok'), [
    `--kubeconfig=${kubeconfig}`,
    `--config=${kwokConfig(dir, kwokPort)}`,
  ]);

  const info: ControlPlaneInfo = {
    dir,
    kubeconfig,
    server,
    caFile,
    adminToken,
    nodes: Array.from({ length: nodeCount }, (_, i) => `kwok-node-${i}`),
    stepLogLine: STEP_LOG_LINE,
    cloneLogLine: CLONE_LOG_LINE,
    nodeLabel: { key: 'triad.test/pool', value: 'kwok' },
  };
  await seed(info, kwok);
  return info;
}

/** The default StorageClass (provisioned by a kwok stage) and the fake nodes, once Ready. */
async function seed(info: ControlPlaneInfo, kwok: Proc): Promise<void> {
  const { KubeConfig, CoreV1Api, StorageV1Api, PatchStrategy, setHeaderOptions } =
    await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(info.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const storage = kc.makeApiClient(StorageV1Api);
  await storage.createStorageClass({
    body: {
      metadata: { name: 'kwok', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
      provisioner: 'kwok.test/volume',
      reclaimPolicy: 'Delete',
      volumeBindingMode: 'Immediate',
    },
  });
  for (const name of info.nodes)
    await core.createNode({
      body: {
        metadata: {
          name,
          annotations: { [KWOK_ANNOTATION]: 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
          labels: {
            'kubernetes.io/hostname': name,
            'kubernetes.io/os': 'linux',
            'kubernetes.io/arch': 'amd64',
            'node-role.kubernetes.io/agent': '',
            [info.nodeLabel.key]: info.nodeLabel.value,
            type: 'kwok',
          },
        },
      },
    });
  await waitUntil(
    'the kwok nodes to be Ready',
    async () => {
      const nodes = await core.listNode();
      const ready = nodes.items.filter((n) =>
        n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      return ready.length === info.nodes.length;
    },
    kwok,
    60_000,
  );
  // The API server taints a new node not-ready; the node lifecycle controller (not run here: fake
  // nodes have no kubelet to judge) would lift it once Ready.
  for (const name of info.nodes)
    await core.patchNode(
      { name, body: [{ op: 'replace', path: '/spec/taints', value: [] }] },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
  await waitUntil(
    'the default service account',
    async () => {
      await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
      return true;
    },
    kwok,
    60_000,
  );
}
