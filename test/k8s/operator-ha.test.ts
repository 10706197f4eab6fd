/**
 * The operator's robustness on the real control plane: a replica killed in the middle of a
 * reconcile leaves nothing a restarted one cannot converge from (no dangling registration), and
 * of two replicas only the Lease holder works until it dies. The operators here run with the
 * chart's namespaced RBAC (`operator.watchNamespace`): Roles in the namespace, no ClusterRole.
 */
import { describe, expect, test } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { clients, kubectl, sleep, waitFor } from './harness/kube.ts';
import { operatorWorld } from './harness/operator-world.ts';
import {
  condition,
  createPool,
  deploymentReplicas,
  poolToken,
  registered,
  waitForPool,
} from './harness/operator.ts';

const w = operatorWorld('operator-ha', { startOperator: false, namespaced: true });

async function holder(): Promise<string | undefined> {
  const api = clients().kc.makeApiClient(CoordinationV1Api);
  const lease = await api
    .readNamespacedLease({ name: 'triad-operator', namespace: w.ns })
    .catch(() => undefined);
  return lease?.spec?.holderIdentity;
}

const logs = () => w.ops.map((o, i) => `--- operator ${i}\n${o.log().slice(-3000)}`).join('\n');

describe('AgentPool operator replicas', () => {
  test('when the operator is killed in the middle of a reconcile, then a restarted one converges with one registration', async () => {
    expect(
      (await kubectl(['get', 'clusterrole', `t-triad-operator-${w.ns}`, '--ignore-not-found', '-o', 'name']))
        .stdout,
    ).toBe('');
    expect((await kubectl(['get', 'role', 't-triad-operator', '-n', w.ns, '-o', 'name'])).stdout.trim()).toBe(
      'role.rbac.authorization.k8s.io/t-triad-operator',
    );
    const first = w.operator('first');
    await waitFor('the first operator to lead', async () => (await holder()) === 'first');
    await createPool(w.ns, 'p', { image: 'triad:test', minReplicas: 1, maxReplicas: 2 });
    // killed as soon as it has started on the pool (the registration may or may not have happened)
    await waitFor(
      'the reconcile to start',
      async () => (await kubectl(['get', 'serviceaccount', 'p-agent', '-n', w.ns])).code === 0,
      60_000,
      20,
    );
    await first.kill('SIGKILL');
    const second = w.operator('second');
    const pool = await waitForPool(
      w.ns,
      'p',
      'Ready',
      (p) => condition(p, 'Ready')?.status === 'True',
      90_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${logs()}`);
    });
    const agents = await registered(w.s, w.ns, 'p');
    expect(agents).toHaveLength(1);
    const { token, agentId } = await poolToken(w.ns, 'p');
    expect(agents[0].id).toBe(agentId);
    expect(pool.status.agentId).toBe(agentId);
    expect((await w.s.anon.as(token).get('/api/v1/ci/queue')).status).toBe(200);
    expect(await deploymentReplicas(w.ns, 'p')).toBe(1);
    expect(second.log()).toMatch(/became leader/);
  });

  test('when two operators run, then only the lease holder reconciles, and the other takes over when it dies', async () => {
    await waitFor('the second operator to lead', async () => (await holder()) === 'second');
    const third = w.operator('third');
    await sleep(3000);
    expect(await holder()).toBe('second');
    expect(third.log()).not.toMatch(/became leader/);

    const second = w.ops[1]!;
    await second.kill('SIGKILL');
    await waitFor('the third operator to lead', async () => (await holder()) === 'third', 60_000).catch(
      (err: unknown) => {
        throw new Error(`${String(err)}\n${logs()}`);
      },
    );
    // the new leader works: a spec change is applied
    await kubectl([
      'patch',
      'agentpool',
      'p',
      '-n',
      w.ns,
      '--type=merge',
      '-p',
      '{"spec":{"minReplicas":2}}',
    ]);
    await waitFor('2 replicas', async () => (await deploymentReplicas(w.ns, 'p')) === 2, 60_000).catch(
      (err: unknown) => {
        throw new Error(`${String(err)}\n${logs()}`);
      },
    );
    await waitForPool(w.ns, 'p', 'observed generation 2', (p) => p.status?.observedGeneration === 2);
    expect(await registered(w.s, w.ns, 'p')).toHaveLength(1);
  });

  test("when the server refuses the operator during a pool's deletion, then the pool shows DeregistrationFailed, and the skip annotation lets it go", async () => {
    await w.ops[2]!.kill('SIGKILL');
    const refused = w.operator('refused', { TRIAD_OPERATOR_TOKEN: 'adm_rotated_away' });
    await waitFor('the refused operator to lead', async () => (await holder()) === 'refused', 60_000);
    const [agent] = await registered(w.s, w.ns, 'p');
    await kubectl(['delete', 'agentpool', 'p', '-n', w.ns, '--wait=false']);
    const stuck = await waitForPool(
      w.ns,
      'p',
      'DeregistrationFailed',
      (p) => condition(p, 'Degraded')?.reason === 'DeregistrationFailed',
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${logs()}`);
    });
    expect(condition(stuck, 'Degraded')).toMatchObject({ status: 'True' });
    expect(condition(stuck, 'Degraded')?.message).toMatch(
      /^cannot deregister the agent agentpool:.*: GET \/api\/v1\/admin\/agents: 401 .*triad.dev\/skip-deregistration=true/,
    );
    expect(stuck.metadata.finalizers).toEqual(['triad.dev/agent-registration']);

    await kubectl(['annotate', 'agentpool', 'p', '-n', w.ns, 'triad.dev/skip-deregistration=true']);
    await waitFor(
      'the pool gone',
      async () => (await kubectl(['get', 'agentpool', 'p', '-n', w.ns])).code !== 0,
      60_000,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${logs()}`);
    });
    expect(refused.log()).toMatch(/skip-deregistration: its agent is left registered/);
    // left registered, as documented: the administrator deletes it
    expect((await registered(w.s, w.ns, 'p')).map((a) => a.id)).toEqual([agent.id]);
    expect((await w.s.admin.delete(`/api/v1/admin/agents/${agent.id}`)).status).toBe(204);
  });
});
