/**
 * The operator's robustness on the real control plane: a replica killed in the middle of a
 * reconcile leaves nothing a restarted one cannot converge from (no dangling registration), and
 * of two replicas only the Lease holder works until it dies.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { clients, deleteNamespace, kubectl, newNamespace, sleep, waitFor } from './harness/kube.ts';
import {
  condition,
  createPool,
  deploymentReplicas,
  installAgentPoolCrd,
  operatorRbac,
  removePools,
  poolToken,
  registered,
  startOperator,
  waitForPool,
  type OperatorProcess,
} from './harness/operator.ts';

let s: TestServer;
let ns: string;
let kubeconfig: string;
const ops: OperatorProcess[] = [];

function operator(identity: string): OperatorProcess {
  const o = startOperator({ server: s.url, token: s.adminToken, namespace: ns, kubeconfig, identity });
  ops.push(o);
  return o;
}

beforeAll(async () => {
  s = await startTestServer();
  ns = await newNamespace('operator-ha');
  await installAgentPoolCrd();
  kubeconfig = await operatorRbac(ns);
});

afterAll(async () => {
  if (ns !== undefined) await removePools(ns);
  for (const o of ops) await o.kill('SIGKILL');
  await s?.close();
  if (ns !== undefined) {
    await kubectl([
      'delete',
      'clusterrole,clusterrolebinding',
      `t-triad-operator-${ns}`,
      '--ignore-not-found',
    ]);
    await deleteNamespace(ns);
  }
});

async function holder(): Promise<string | undefined> {
  const api = clients().kc.makeApiClient(CoordinationV1Api);
  const lease = await api
    .readNamespacedLease({ name: 'triad-operator', namespace: ns })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity;
}

const logs = () => ops.map((o, i) => `--- operator ${i}\n${o.log().slice(-3000)}`).join('\n');

describe('AgentPool operator replicas', () => {
  test('when the operator is killed in the middle of a reconcile, then a restarted one converges with one registration', async () => {
    const first = operator('first');
    await waitFor('the first operator to lead', async () => (await holder()) === 'first');
    await createPool(ns, 'p', { image: 'triad:test', minReplicas: 1, maxReplicas: 2 });
    // killed as soon as it has started on the pool (the registration may or may not have happened)
    await waitFor(
      'the reconcile to start',
      async () => (await kubectl(['get', 'serviceaccount', 'p-agent', '-n', ns])).code === 0,
      60_000,
      20,
    );
    await first.kill('SIGKILL');
    const second = operator('second');
    const pool = await waitForPool(
      ns,
      'p',
      'Ready',
      (p) => condition(p, 'Ready')?.status === 'True',
      90_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${logs()}`);
    });
    const agents = await registered(s, ns, 'p');
    expect(agents).toHaveLength(1);
    const { token, agentId } = await poolToken(ns, 'p');
    expect(agents[0].id).toBe(agentId);
    expect(pool.status.agentId).toBe(agentId);
    expect((await s.anon.as(token).get('/api/v1/ci/queue')).status).toBe(200);
    expect(await deploymentReplicas(ns, 'p')).toBe(1);
    expect(second.log()).toMatch(/became leader/);
  });

  test('when two operators run, then only the lease holder reconciles, and the other takes over when it dies', async () => {
    await waitFor('the second operator to lead', async () => (await holder()) === 'second');
    const third = operator('third');
    await sleep(3000);
    expect(await holder()).toBe('second');
    expect(third.log()).not.toMatch(/became leader/);

    const second = ops[1]!;
    await second.kill('SIGKILL');
    await waitFor('the third operator to lead', async () => (await holder()) === 'third', 60_000).catch(
      (err: unknown) => {
        throw new Error(`${String(err)}\n${logs()}`);
      },
    );
    // the new leader works: a spec change is applied
    await kubectl(['patch', 'agentpool', 'p', '-n', ns, '--type=merge', '-p', '{"spec":{"minReplicas":2}}']);
    await waitFor('2 replicas', async () => (await deploymentReplicas(ns, 'p')) === 2, 60_000).catch(
      (err: unknown) => {
        throw new Error(`${String(err)}\n${logs()}`);
      },
    );
    await waitForPool(ns, 'p', 'observed generation 2', (p) => p.status?.observedGeneration === 2);
    expect(await registered(s, ns, 'p')).toHaveLength(1);
  });
});
