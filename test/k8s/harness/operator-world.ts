/**
 * The set-up every operator test file shares: a Triad server with an org owner, a namespace of
 * its own with the AgentPool CRD and the operator's RBAC (the chart's ClusterRole bound to a
 * service account), and operators started on demand; torn down in the right order (pools first,
 * so their finalizers run while an operator still does, then the operators, the server, the RBAC
 * and the namespace).
 */
import { afterAll, beforeAll } from '@jest/globals';
import { commitFiles, gitRepo } from '../../helpers/ci.ts';
import { startTestServer, type TestServer, type TestUser } from '../../helpers/server.ts';
import { deleteNamespace, kubectl, newNamespace } from './kube.ts';
import {
  installAgentPoolCrd,
  operatorRbac,
  removePools,
  startOperator,
  type OperatorProcess,
} from './operator.ts';

export type OperatorWorld = {
  s: TestServer;
  owner: TestUser;
  org: string;
  ns: string;
  /** Every operator started so far (`operator()`), the first one is the default. */
  ops: OperatorProcess[];
  /** Starts a `triad operator` on this namespace, as the chart's service account (`env` added). */
  operator: (identity?: string, env?: Record<string, string>) => OperatorProcess;
  /** Throws `err` with the tail of the operators' logs (for `.catch(w.failWithLog)`). */
  failWithLog: (err: unknown) => never;
  /** Pushes `.pipeline.yml` with `file` to a new git repository; its first pipeline's API path. */
  pushPipeline: (file: string) => Promise<string>;
};

/**
 * Registers the `beforeAll`/`afterAll` of a file. The returned object is filled in by `beforeAll`;
 * with `startOperator` (the default) one operator runs from the start; `namespaced`: the chart's
 * namespaced RBAC (`operator.watchNamespace`) instead of its ClusterRole.
 */
export function operatorWorld(
  prefix: string,
  opts: { startOperator?: boolean; namespaced?: boolean } = {},
): OperatorWorld {
  let kubeconfig = '';
  // the operator's token: a site administrator's with only agents:admin (what the chart gives it)
  let operatorToken = '';
  const w = {
    ops: [] as OperatorProcess[],
    operator: (identity?: string, env?: Record<string, string>) => {
      const o = startOperator({
        server: w.s.url,
        token: operatorToken,
        namespace: w.ns,
        kubeconfig,
        identity,
        env,
      });
      w.ops.push(o);
      return o;
    },
    failWithLog: (err: unknown): never => {
      const logs = w.ops.map((o, i) => `--- operator ${i}\n${o.log().slice(-6000)}`).join('\n');
      throw new Error(`${String(err)}\noperator log:\n${logs}`);
    },
    pushPipeline: async (file: string) => {
      const repo = await gitRepo(w.s, w.owner, w.org);
      await commitFiles(repo, { '.pipeline.yml': file });
      await repo.push();
      return `/api/v1/repos/${w.org}/${repo.name}/pipelines/1`;
    },
  } as OperatorWorld;

  beforeAll(async () => {
    w.s = await startTestServer();
    w.owner = await w.s.newUser();
    w.org = await w.s.newOrg(w.owner);
    const t = await w.s.admin.post('/api/v1/user/tokens', { name: 'operator', scopes: ['agents:admin'] });
    if (t.status !== 201) throw new Error(`operator token: ${t.status} ${t.text}`);
    operatorToken = t.body.data.token;
    w.ns = await newNamespace(prefix);
    await installAgentPoolCrd();
    kubeconfig = await operatorRbac(w.ns, opts.namespaced);
    if (opts.startOperator !== false) w.operator();
  });

  afterAll(async () => {
    if (w.ns !== undefined) await removePools(w.ns);
    for (const o of w.ops) await o.kill('SIGKILL');
    await w.s?.close();
    if (w.ns !== undefined) {
      await kubectl([
        'delete',
        'clusterrole,clusterrolebinding',
        `t-triad-operator-${w.ns}`,
        '--ignore-not-found',
      ]);
      await deleteNamespace(w.ns);
    }
  });
  return w;
}

/** A pipeline file whose pipeline only agents of pool `pool` claim: two steps. */
export const labelled = (pool: string) => `labels: {pool: ${pool}}
steps:
  - name: hello
    image: alpine:3.20
    commands: ["echo hello"]
  - name: world
    image: alpine:3.20
    commands: ["echo world"]
`;
