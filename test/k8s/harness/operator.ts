/**
 * What the operator tests share: the AgentPool CRD from the chart, `triad operator` processes
 * (run outside the cluster against the real API server, like a developer's `triad operator`),
 * pools as objects, and the pool's agent token read back from its Secret.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { TestServer } from '../../helpers/server.ts';
import { parseAllDocuments } from 'yaml';
import {
  CHART,
  ROOT,
  clients,
  cluster,
  helmOk,
  kubectl,
  kubectlOk,
  serviceAccountKubeconfig,
  waitFor,
} from './kube.ts';

export const CRD_FILE = path.join(CHART, 'crds', 'agentpools.triad.dev.yaml');

let crd: Promise<void> | undefined;
export function installAgentPoolCrd(): Promise<void> {
  crd ??= (async () => {
    await kubectlOk(['apply', '--server-side', '--force-conflicts', '-f', CRD_FILE]);
    await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', 'crd/agentpools.triad.dev']);
  })();
  return crd;
}

export type OperatorProcess = {
  proc: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
  kill: (signal?: NodeJS.Signals) => Promise<number | null>;
};

/** A `triad operator` process watching one namespace. */
export function startOperator(o: {
  server: string;
  token: string;
  namespace: string;
  kubeconfig?: string;
  identity?: string;
  env?: Record<string, string>;
}): OperatorProcess {
  const proc = spawn(process.execPath, [path.join(ROOT, 'src', 'cli.ts'), 'operator'], {
    cwd: ROOT,
    env: {
      ...process.env,
      TRIAD_OPERATOR_SERVER: o.server,
      TRIAD_OPERATOR_TOKEN: o.token,
      TRIAD_OPERATOR_NAMESPACE: o.namespace,
      TRIAD_OPERATOR_WATCH_NAMESPACE: o.namespace,
      TRIAD_OPERATOR_LEASE_SECONDS: '4',
      TRIAD_OPERATOR_RESYNC_SECONDS: '10',
      TRIAD_OPERATOR_SWEEP_GRACE_SECONDS: '2',
      POD_NAME: o.identity ?? `operator-${process.pid}-${Math.random().toString(36).slice(2, 7)}`,
      KUBECONFIG: o.kubeconfig ?? cluster().kubeconfig,
      LOG_LEVEL: 'info',
      // /healthz, /readyz and /metrics on a port of the system's choice (see operatorPort)
      TRIAD_OPERATOR_METRICS_PORT: '0',
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return {
    proc,
    log: () => out,
    exited,
    kill: (signal = 'SIGTERM') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** The port an operator serves /healthz, /readyz and /metrics on (from its log). */
export function operatorPort(op: OperatorProcess): Promise<number> {
  return waitFor('the operator serving its probes', () => {
    const line = op
      .log()
      .split('\n')
      .find((l) => l.includes('serving /healthz, /readyz and /metrics'));
    const port = /"port":(\d+)/.exec(line ?? '')?.[1];
    return Promise.resolve(port === undefined ? undefined : Number(port));
  });
}

const custom = () => clients().kc.makeApiClient(CustomObjectsApi);
const ref = (namespace: string, name: string) => ({
  group: 'triad.dev',
  version: 'v1alpha1',
  plural: 'agentpools',
  namespace,
  name,
});

export async function createPool(
  namespace: string,
  name: string,
  spec: Record<string, unknown>,
): Promise<any> {
  return custom().createNamespacedCustomObject({
    ...ref(namespace, name),
    body: { apiVersion: 'triad.dev/v1alpha1', kind: 'AgentPool', metadata: { name, namespace }, spec },
  });
}

export async function getPool(namespace: string, name: string): Promise<any> {
  return custom().getNamespacedCustomObject(ref(namespace, name));
}

export async function deletePool(namespace: string, name: string): Promise<void> {
  await custom().deleteNamespacedCustomObject(ref(namespace, name));
}

export function condition(
  pool: any,
  type: string,
): { status: string; reason: string; message: string } | undefined {
  return (pool?.status?.conditions ?? []).find((c: any) => c.type === type);
}

/** Waits until the pool's status satisfies `pred`; returns the pool. */
export function waitForPool(
  namespace: string,
  name: string,
  what: string,
  pred: (p: any) => boolean,
  timeoutMs = 60_000,
): Promise<any> {
  return waitFor(
    `pool ${name}: ${what}`,
    async () => {
      const p = await getPool(namespace, name);
      return pred(p) ? p : undefined;
    },
    timeoutMs,
    100,
  );
}

/** The replicas the pool's agent Deployment asks for (undefined: no Deployment). */
export async function deploymentReplicas(namespace: string, pool: string): Promise<number | undefined> {
  try {
    const d = await clients().apps.readNamespacedDeployment({ name: `${pool}-agent`, namespace });
    return d.spec?.replicas;
  } catch {
    return undefined;
  }
}

/** The agent token the operator stored for a pool. */
export async function poolToken(
  namespace: string,
  pool: string,
): Promise<{ token: string; agentId: number }> {
  const s = await clients().core.readNamespacedSecret({ name: `${pool}-agent-token`, namespace });
  return {
    token: Buffer.from(s.data?.token ?? '', 'base64').toString(),
    agentId: Number(s.metadata?.annotations?.['triad.dev/agent-id']),
  };
}

const RBAC_KINDS = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'];

/**
 * The chart's operator RBAC for a release `t` in `namespace`, applied (`namespaced`: with
 * `operator.watchNamespace` set to it, Roles; otherwise `operator.clusterWide`, a ClusterRole);
 * returns the operator's kubeconfig.
 */
export async function operatorRbac(namespace: string, namespaced = false): Promise<string> {
  const out = await helmOk([
    'template',
    't',
    CHART,
    '-n',
    namespace,
    '--set',
    'agent.mode=operator',
    '--set',
    'secrets.adminToken=x',
    // the test pools run their steps in their own namespace
    ...['--set', `agent.steps.namespace=${namespace}`],
    ...(namespaced
      ? ['--set', `operator.watchNamespace=${namespace}`]
      : ['--set', 'operator.clusterWide=true']),
    '--show-only',
    'templates/operator.yaml',
  ]);
  const docs = parseAllDocuments(out)
    .map((d) => d.toJS())
    .filter((d) => RBAC_KINDS.includes(d?.kind));
  await kubectlOk(['apply', '--validate=strict', '-f', '-'], {
    input: docs.map((d) => JSON.stringify(d)).join('\n'),
  });
  return serviceAccountKubeconfig(namespace, 't-triad-operator');
}

/**
 * Deletes the pools of a namespace while an operator still runs (it deregisters them); whatever is
 * left after a grace loses its finalizer, so the namespace can be deleted.
 */
export async function removePools(namespace: string): Promise<void> {
  await kubectl(['delete', 'agentpools', '--all', '-n', namespace, '--wait=true', '--timeout=30s']);
  const left = await kubectl(['get', 'agentpools', '-n', namespace, '-o', 'name']);
  for (const name of left.stdout.split('\n').filter((l) => l.trim() !== '')) {
    await kubectl(['patch', name, '-n', namespace, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
  }
}

/** The agents registered on the server for a pool (normally one). */
export async function registered(s: TestServer, namespace: string, pool: string): Promise<any[]> {
  const r = await s.admin.get('/api/v1/admin/agents');
  return r.body.data.filter((a: any) => a.name.startsWith(`agentpool:${namespace}/${pool}:`));
}

/** The names of a pool's agent pods not being deleted, sorted. */
export async function agentPods(namespace: string, pool: string): Promise<string[]> {
  const pods = await clients().core.listNamespacedPod({
    namespace,
    labelSelector: `triad.dev/agent-pool=${pool},app.kubernetes.io/component=agent`,
  });
  return pods.items
    .filter((p) => p.metadata?.deletionTimestamp === undefined)
    .map((p) => p.metadata!.name!)
    .sort();
}
