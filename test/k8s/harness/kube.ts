/**
 * What the k8s tests use of the shared control plane (started by test/k8s/global-setup.ts):
 * kubectl and helm from the tools cache, API clients, namespaces of their own, service account
 * tokens, and waiting for a state.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  Watch,
  type V1Namespace,
  type V1Pod,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { toolPath } from '../../../scripts/tools/tools.ts';
import type { ControlPlaneInfo } from './control-plane.ts';

export const ROOT = path.resolve(import.meta.dirname, '..', '..', '..');
export const CHART = path.join(ROOT, 'charts', 'triad');

let cached: ControlPlaneInfo | undefined;

/** The control plane of this jest run. */
export function cluster(): ControlPlaneInfo {
  if (cached !== undefined) return cached;
  const file = process.env.TRIAD_TEST_K8S;
  if (file === undefined) throw new Error('TRIAD_TEST_K8S is not set: run through `npm run test:k8s`');
  cached = JSON.parse(fs.readFileSync(file, 'utf8')) as ControlPlaneInfo;
  return cached;
}

export type Run = { code: number; stdout: string; stderr: string };

function run(bin: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      args,
      { env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024, timeout: 170_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
  });
}

/** Like `run` but throws with the command's output when it fails. */
function must(what: string, r: Run): string {
  if (r.code !== 0)
    throw new Error(`${what} failed (exit ${r.code}):\n${r.stderr}\n${r.stdout}`.slice(0, 20_000));
  return r.stdout;
}

export type KubectlOptions = { input?: string; kubeconfig?: string };

export function kubectl(args: string[], o: KubectlOptions = {}): Promise<Run> {
  return run(
    toolPath('kubernetes', 'kubectl'),
    args,
    { KUBECONFIG: o.kubeconfig ?? cluster().kubeconfig },
    o.input,
  );
}
export async function kubectlOk(args: string[], o: KubectlOptions = {}): Promise<string> {
  return must(`kubectl ${args.join(' ')}`, await kubectl(args, o));
}

/** The chart's required credentials for the tests (the chart generates none). */
export const TEST_CREDENTIALS = path.join(import.meta.dirname, 'chart-credentials-values.yaml');
const RENDERING = new Set(['template', 'install', 'upgrade', 'lint']);

/** The values of TEST_CREDENTIALS. */
export function testCredentials(): { secrets: Record<string, string>; s3: Record<string, string> } {
  return parse(fs.readFileSync(TEST_CREDENTIALS, 'utf8')) as ReturnType<typeof testCredentials>;
}

/** `credentials: false`: without TEST_CREDENTIALS (given by default to rendering commands). */
export type HelmOptions = KubectlOptions & { credentials?: boolean };

/**
 * helm with its cache/config/data under the control plane's directory (never the user's).
 * Rendering commands get TEST_CREDENTIALS first, so a test's own values and --set win over it;
 * not an upgrade that reuses the release's values (which hold the credentials already, and which
 * a new values file would override).
 */
export function helm(args: string[], o: HelmOptions = {}): Promise<Run> {
  const home = path.join(cluster().dir, 'helm');
  const [command, ...rest] = args;
  const withCredentials =
    o.credentials !== false &&
    command !== undefined &&
    RENDERING.has(command) &&
    !rest.some((a) => /^--(reset-then-)?reuse-values$/.test(a))
      ? [command, '-f', TEST_CREDENTIALS, ...rest]
      : args;
  return run(
    toolPath('helm'),
    withCredentials,
    {
      KUBECONFIG: o.kubeconfig ?? cluster().kubeconfig,
      HELM_CACHE_HOME: path.join(home, 'cache'),
      HELM_CONFIG_HOME: path.join(home, 'config'),
      HELM_DATA_HOME: path.join(home, 'data'),
    },
    o.input,
  );
}
export async function helmOk(args: string[], o: HelmOptions = {}): Promise<string> {
  return must(`helm ${args.join(' ')}`, await helm(args, o));
}

export type Clients = {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  batch: BatchV1Api;
  rbac: RbacAuthorizationV1Api;
};

export function clients(kubeconfig = cluster().kubeconfig): Clients {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    batch: kc.makeApiClient(BatchV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a value other than undefined/false; throws with `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
  everyMs = 250,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: Error | undefined;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err instanceof Error ? err : new Error(String(err));
    }
    if (Date.now() > until)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : `: ${last.message}`}`,
      );
    await sleep(everyMs);
  }
}

/** Pod Security Admission labels enforcing the restricted profile (and warning/auditing with it). */
export const RESTRICTED = {
  'pod-security.kubernetes.io/enforce': 'restricted',
  'pod-security.kubernetes.io/enforce-version': 'latest',
  'pod-security.kubernetes.io/warn': 'restricted',
  'pod-security.kubernetes.io/audit': 'restricted',
};

/** A new namespace (restricted Pod Security by default) whose default service account exists. */
export async function newNamespace(
  prefix: string,
  labels: Record<string, string> = RESTRICTED,
): Promise<string> {
  const { core } = clients();
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  const body: V1Namespace = { metadata: { name, labels } };
  await core.createNamespace({ body });
  await waitFor(`service account default in ${name}`, async () => {
    await core.readNamespacedServiceAccount({ name: 'default', namespace: name });
    return true;
  });
  return name;
}

/** Deletes a namespace and waits until it is gone (the namespace controller empties it first). */
export async function deleteNamespace(name: string, timeoutMs = 90_000): Promise<void> {
  const { core } = clients();
  await core.deleteNamespace({ name }).catch(() => undefined);
  await waitFor(
    `namespace ${name} to be deleted`,
    async () => {
      try {
        await core.readNamespace({ name });
        return false;
      } catch {
        return true;
      }
    },
    timeoutMs,
    500,
  );
}

/** A token of a service account (TokenRequest API), as a kubeconfig file in the control plane's directory. */
export async function serviceAccountKubeconfig(
  namespace: string,
  sa: string,
  stepNamespace = namespace,
): Promise<string> {
  const { core } = clients();
  const tr = await core.createNamespacedServiceAccountToken({
    name: sa,
    namespace,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  const token = tr.status?.token;
  if (token === undefined) throw new Error(`no token for ${namespace}/${sa}`);
  const c = cluster();
  const file = path.join(c.dir, `kubeconfig-${namespace}-${sa}`);
  fs.writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: t, cluster: {server: ${JSON.stringify(c.server)}, certificate-authority: ${JSON.stringify(c.caFile)}}}]`,
      `users: [{name: ${sa}, user: {token: ${JSON.stringify(token)}}}]`,
      `contexts: [{name: t, context: {cluster: t, user: ${sa}, namespace: ${stepNamespace}}}]`,
      'current-context: t',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return file;
}

/** Objects of the given kinds in a namespace (names as `kind/name`), optionally by label selector. */
export async function objectsIn(namespace: string, kinds: string, selector?: string): Promise<string[]> {
  const args = ['get', kinds, '-n', namespace, '-o', 'name', '--ignore-not-found'];
  if (selector !== undefined) args.push('-l', selector);
  const out = await kubectlOk(args);
  return out.split('\n').filter((l) => l.trim() !== '');
}

/** Records every pod state of a namespace as the API server reports it (a watch), for assertions afterwards. */
export class PodRecorder {
  /** Every version seen, in order, by pod name. */
  readonly seen = new Map<string, V1Pod[]>();
  private req: { abort: () => void } | undefined;

  static async start(namespace: string): Promise<PodRecorder> {
    const r = new PodRecorder();
    const { kc } = clients();
    const w = new Watch(kc);
    r.req = await w.watch(
      `/api/v1/namespaces/${namespace}/pods`,
      {},
      (_type: string, pod: V1Pod) => {
        const name = pod.metadata?.name ?? '';
        const list = r.seen.get(name) ?? [];
        list.push(pod);
        r.seen.set(name, list);
      },
      () => undefined,
    );
    return r;
  }

  /** Pod names seen, in the order they first appeared. */
  names(): string[] {
    return [...this.seen.keys()];
  }

  first(name: string): V1Pod {
    const p = this.seen.get(name)?.[0];
    if (p === undefined) throw new Error(`pod ${name} never seen`);
    return p;
  }

  /** Whether some version of the pod matches. */
  some(name: string, pred: (p: V1Pod) => boolean): boolean {
    return (this.seen.get(name) ?? []).some(pred);
  }

  stop(): void {
    this.req?.abort();
  }
}
