/**
 * The AgentPool operator on the real control plane with a real Triad server. The operator runs as
 * a process outside the cluster with the chart's operator ClusterRole (a service account token), so
 * its RBAC is exercised too. Kwok nodes run no containers: agent pods are only "Running"; the
 * agents are played by the test through the HTTP API with the pool's own token (their pod names as
 * instances); operator-acceptance.test.ts runs a real agent.
 */
import { describe, expect, test } from '@jest/globals';
import { clients, kubectlOk, sleep, waitFor } from './harness/kube.ts';
import { labelled, operatorWorld } from './harness/operator-world.ts';
import {
  condition,
  createPool,
  deletePool,
  deploymentReplicas,
  getPool,
  poolToken,
  registered,
  agentPods,
  waitForPool,
} from './harness/operator.ts';

const w = operatorWorld('operator');

describe('AgentPool operator', () => {
  test('when a pool has maxReplicas below minReplicas, then the API server rejects it with the schema message', async () => {
    const err = await createPool(w.ns, 'bad', { image: 'triad:test', minReplicas: 3, maxReplicas: 1 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(String((err as any)?.body ?? err)).toMatch(/maxReplicas must be at least minReplicas/);
    const neg = await createPool(w.ns, 'bad', { image: 'triad:test', minReplicas: -1 }).catch(
      (e: unknown) => e,
    );
    expect(String(neg?.body ?? neg)).toMatch(/minReplicas/);
  });

  test('when a pool names a step namespace that is not allowed, or invalid labels, then it is InvalidSpec and nothing is made for it', async () => {
    await createPool(w.ns, 'escape', {
      image: 'triad:test',
      minReplicas: 1,
      steps: { namespace: 'kube-system' },
    });
    await createPool(w.ns, 'spaced', { image: 'triad:test', minReplicas: 1, labels: { pool: 'a b' } });
    const escape = await waitForPool(
      w.ns,
      'escape',
      'InvalidSpec',
      (p) => condition(p, 'Degraded')?.reason === 'InvalidSpec',
    ).catch(w.failWithLog);
    expect(condition(escape, 'Degraded')).toMatchObject({ status: 'True' });
    expect(condition(escape, 'Degraded')?.message).toMatch(
      /^steps.namespace "kube-system" is not allowed: the operator runs steps only in the pool's own namespace/,
    );
    expect(condition(escape, 'Ready')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    const spaced = await waitForPool(
      w.ns,
      'spaced',
      'InvalidSpec',
      (p) => condition(p, 'Degraded')?.reason === 'InvalidSpec',
    ).catch(w.failWithLog);
    expect(condition(spaced, 'Degraded')?.message).toBe('labels: invalid value "a b" of label pool');
    const made = await kubectlOk([
      'get',
      'role,rolebinding',
      '-n',
      'kube-system',
      '-l',
      'triad.dev/agent-pool=escape',
      '-o',
      'name',
    ]);
    expect(made.trim()).toBe('');
    expect(await deploymentReplicas(w.ns, 'escape')).toBeUndefined();
    expect(await deploymentReplicas(w.ns, 'spaced')).toBeUndefined();
    expect(await registered(w.s, w.ns, 'escape')).toEqual([]);
    for (const name of ['escape', 'spaced']) await deletePool(w.ns, name);
  });

  test('when a pool is created, then its objects appear with owner references, it is registered and Ready; deleted objects come back', async () => {
    await createPool(w.ns, 'main', {
      image: 'triad:test',
      minReplicas: 1,
      maxReplicas: 3,
      capacity: 2,
      scaleDownDelaySeconds: 2,
      podLabels: { team: 'ci' },
    });
    const pool = await waitForPool(
      w.ns,
      'main',
      'Ready',
      (p) => condition(p, 'Ready')?.status === 'True',
    ).catch(w.failWithLog);
    expect(condition(pool, 'Ready')).toMatchObject({ reason: 'AgentsReady' });
    expect(condition(pool, 'Degraded')).toMatchObject({ status: 'False' });
    expect(pool.status).toMatchObject({
      replicas: 1,
      readyReplicas: 1,
      desiredReplicas: 1,
      observedGeneration: 1,
    });
    expect(pool.metadata.finalizers).toEqual(['triad.dev/agent-registration']);
    const uid = pool.metadata.uid;

    const { apps, core, rbac } = clients();
    const d = await apps.readNamespacedDeployment({ name: 'main-agent', namespace: w.ns });
    const sa = await core.readNamespacedServiceAccount({ name: 'main-agent', namespace: w.ns });
    const secret = await core.readNamespacedSecret({ name: 'main-agent-token', namespace: w.ns });
    const role = await rbac.readNamespacedRole({ name: 'main-agent-steps', namespace: w.ns });
    const binding = await rbac.readNamespacedRoleBinding({ name: 'main-agent-steps', namespace: w.ns });
    for (const o of [d, sa, secret, role, binding]) {
      expect(o.metadata?.ownerReferences).toEqual([
        expect.objectContaining({
          kind: 'AgentPool',
          name: 'main',
          uid,
          controller: true,
          blockOwnerDeletion: true,
        }),
      ]);
    }
    expect(role.rules?.map((r) => [r.resources, r.verbs])).toEqual([
      [['pods'], ['get', 'list', 'watch', 'create', 'delete']],
      [['pods/log'], ['get']],
      [['events'], ['get', 'list', 'watch']],
      [['persistentvolumeclaims'], ['get', 'list', 'create', 'delete']],
    ]);
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'main-agent', namespace: w.ns }]);
    const c = d.spec!.template.spec!;
    expect(c.serviceAccountName).toBe('main-agent');
    expect(d.spec!.template.metadata!.labels).toMatchObject({ team: 'ci', 'triad.dev/agent-pool': 'main' });
    const env = Object.fromEntries((c.containers[0]!.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
    expect(env).toMatchObject({
      TRIAD_AGENT_SERVER: w.s.url,
      TRIAD_AGENT_TOKEN: { secretKeyRef: { name: 'main-agent-token', key: 'token' } },
      TRIAD_AGENT_CAPACITY: '2',
      TRIAD_AGENT_NAMESPACE: w.ns,
    });
    // the empty label set (the value "" is dropped by the API server)
    expect(c.containers[0]!.env?.find((e) => e.name === 'TRIAD_AGENT_LABELS')?.value ?? '').toBe('');

    const { token, agentId } = await poolToken(w.ns, 'main');
    expect(pool.status.agentId).toBe(agentId);
    expect((await registered(w.s, w.ns, 'main')).map((a) => [a.id, a.name])).toEqual([
      [agentId, `agentpool:${w.ns}/main:${uid}`],
    ]);
    expect((await w.s.anon.as(token).get('/api/v1/ci/queue')).status).toBe(200);

    // drift: the Deployment and the token Secret are deleted by hand
    await apps.deleteNamespacedDeployment({ name: 'main-agent', namespace: w.ns });
    await core.deleteNamespacedSecret({ name: 'main-agent-token', namespace: w.ns });
    await waitFor('the Deployment back', async () => (await deploymentReplicas(w.ns, 'main')) === 1).catch(
      w.failWithLog,
    );
    const again = await waitFor('a new token Secret', () => poolToken(w.ns, 'main').catch(() => undefined));
    expect(again.agentId).not.toBe(agentId);
    expect((await registered(w.s, w.ns, 'main')).map((a) => a.id)).toEqual([again.agentId]);
    expect((await w.s.anon.as(token).get('/api/v1/ci/queue')).status).toBe(401);
    await waitForPool(
      w.ns,
      'main',
      'the new agent in the status',
      (p) => p.status?.agentId === again.agentId,
    );
  });

  test('when three labelled pipelines queue for a pool of capacity 1, then it scales to 3 at once, keeps busy agents and returns to 0 after the delay; other pools stay put', async () => {
    await createPool(w.ns, 'gpu', {
      image: 'triad:test',
      minReplicas: 0,
      maxReplicas: 5,
      capacity: 1,
      scaleDownDelaySeconds: 3,
      labels: { pool: 'gpu' },
    });
    await waitForPool(
      w.ns,
      'gpu',
      'scaled to zero',
      (p) => condition(p, 'Ready')?.reason === 'ScaledToZero',
    ).catch(w.failWithLog);
    const apis = await Promise.all([1, 2, 3].map(() => w.pushPipeline(labelled('gpu'))));
    const queued = Date.now();
    await waitFor('3 replicas', async () => (await deploymentReplicas(w.ns, 'gpu')) === 3, 60_000, 50).catch(
      w.failWithLog,
    );
    process.stdout.write(
      `operator test: 3 pipelines queued -> 3 replicas requested in ${Date.now() - queued} ms\n`,
    );
    expect(await deploymentReplicas(w.ns, 'main')).toBe(1);
    await waitForPool(
      w.ns,
      'gpu',
      'pending 3',
      (p) => p.status?.pending === 3 && p.status?.readyReplicas === 3,
    );

    // labels route: the main pool's agents (no labels) see nothing; each gpu agent pod claims one
    const main = w.s.anon.as((await poolToken(w.ns, 'main')).token);
    expect((await main.post('/api/v1/ci/poll')).status).toBe(204);
    const gpu = w.s.anon.as((await poolToken(w.ns, 'gpu')).token);
    const pods = await agentPods(w.ns, 'gpu');
    expect(pods).toHaveLength(3);
    const claims: number[] = [];
    for (const pod of pods) {
      const r = await gpu.post('/api/v1/ci/poll?labels=pool=gpu', undefined, { 'X-Svc-Agent-Instance': pod });
      expect(r.status).toBe(200);
      claims.push(r.body.pipeline_id);
    }
    await waitForPool(w.ns, 'gpu', 'running 3', (p) => p.status?.running === 3 && p.status?.pending === 0);

    // the first agent finishes: after the delay one replica goes, and it is that idle one
    await gpu.put(`/api/v1/ci/pipelines/${claims[0]}/status`, { status: 'success' });
    await waitFor('2 replicas', async () => (await deploymentReplicas(w.ns, 'gpu')) === 2, 60_000, 100).catch(
      w.failWithLog,
    );
    await waitFor('2 agent pods', async () => (await agentPods(w.ns, 'gpu')).length === 2);
    expect(await agentPods(w.ns, 'gpu')).toEqual(pods.slice(1));

    for (const id of claims.slice(1))
      await gpu.put(`/api/v1/ci/pipelines/${id}/status`, { status: 'success' });
    const p = await waitForPool(
      w.ns,
      'gpu',
      'back to zero',
      (x) => x.status?.desiredReplicas === 0 && x.status?.replicas === 0,
    );
    expect(condition(p, 'Ready')).toMatchObject({ status: 'True', reason: 'ScaledToZero' });
    expect(await deploymentReplicas(w.ns, 'main')).toBe(1);
    for (const api of apis) expect((await w.owner.client.get(api)).body.status).toBe('success');
  });

  test('when capacity is 2 and one pipeline is left on each of 2 agents, then the pool keeps both busy agents and only removes one once it is idle', async () => {
    await createPool(w.ns, 'wide', {
      image: 'triad:test',
      minReplicas: 0,
      maxReplicas: 4,
      capacity: 2,
      scaleDownDelaySeconds: 2,
      labels: { pool: 'wide' },
    });
    await Promise.all([1, 2, 3, 4].map(() => w.pushPipeline(labelled('wide'))));
    await waitForPool(
      w.ns,
      'wide',
      '2 agents ready',
      (p) => p.status?.desiredReplicas === 2 && p.status?.readyReplicas === 2,
    ).catch(w.failWithLog);
    const pods = await agentPods(w.ns, 'wide');
    expect(pods).toHaveLength(2);
    const agent = w.s.anon.as((await poolToken(w.ns, 'wide')).token);
    const claims: Record<string, number[]> = { [pods[0]!]: [], [pods[1]!]: [] };
    for (const pod of [...pods, ...pods]) {
      const r = await agent.post('/api/v1/ci/poll?labels=pool=wide', undefined, {
        'X-Svc-Agent-Instance': pod,
      });
      expect(r.status).toBe(200);
      claims[pod]!.push(r.body.pipeline_id);
    }
    await waitForPool(w.ns, 'wide', 'running 4', (p) => p.status?.running === 4);

    // one pipeline finishes on each agent: 2 running, one per agent; the figures alone ask for 1
    for (const pod of pods)
      await agent.put(`/api/v1/ci/pipelines/${claims[pod]![0]}/status`, { status: 'success' });
    await waitForPool(w.ns, 'wide', 'running 2', (p) => p.status?.running === 2);
    await sleep(6000); // three times the scale-down delay
    const kept = await getPool(w.ns, 'wide');
    expect(kept.status.desiredReplicas).toBe(2);
    expect(condition(kept, 'Scaling')).toMatchObject({ reason: 'Stable' });
    expect(await deploymentReplicas(w.ns, 'wide')).toBe(2);
    expect(await agentPods(w.ns, 'wide')).toEqual(pods);

    // the first agent is idle now: it is the one that goes
    await agent.put(`/api/v1/ci/pipelines/${claims[pods[0]!]![1]}/status`, { status: 'success' });
    await waitFor('1 replica', async () => (await deploymentReplicas(w.ns, 'wide')) === 1, 60_000, 100).catch(
      w.failWithLog,
    );
    await waitFor('1 agent pod', async () => (await agentPods(w.ns, 'wide')).length === 1);
    expect(await agentPods(w.ns, 'wide')).toEqual([pods[1]]);
    await agent.put(`/api/v1/ci/pipelines/${claims[pods[1]!]![1]}/status`, { status: 'success' });
    await waitForPool(w.ns, 'wide', 'back to zero', (x) => x.status?.desiredReplicas === 0);
    await deletePool(w.ns, 'wide');
  });

  test('when a step pod of a finished pipeline is left behind, then the operator sweeps it', async () => {
    const pods = await agentPods(w.ns, 'main');
    await w.pushPipeline('steps:\n  - {name: a, image: alpine:3.20, commands: ["true"]}\n');
    const main = w.s.anon.as((await poolToken(w.ns, 'main')).token);
    const job = await main.post('/api/v1/ci/poll', undefined, { 'X-Svc-Agent-Instance': pods[0]! });
    expect(job.status).toBe(200);
    await main.put(`/api/v1/ci/pipelines/${job.body.pipeline_id}/status`, { status: 'success' });
    const name = `triad-p${job.body.pipeline_id}-s1-stray`;
    await clients().core.createNamespacedPersistentVolumeClaim({
      namespace: w.ns,
      body: {
        metadata: {
          name,
          labels: {
            'app.kubernetes.io/managed-by': 'triad-agent',
            'triad.dev/pipeline': String(job.body.pipeline_id),
            'triad.dev/agent': pods[0]!,
          },
        },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Mi' } } },
      },
    });
    await waitFor(
      'the stray claim swept',
      async () => {
        const left = await clients().core.listNamespacedPersistentVolumeClaim({ namespace: w.ns });
        return !left.items.some(
          (c) => c.metadata?.name === name && c.metadata.deletionTimestamp === undefined,
        );
      },
      60_000,
      500,
    ).catch(w.failWithLog);
  });

  test('when a pool is deleted, then its objects are garbage-collected and its agent is deregistered', async () => {
    const { token } = await poolToken(w.ns, 'gpu');
    expect(await registered(w.s, w.ns, 'gpu')).toHaveLength(1);
    await deletePool(w.ns, 'gpu');
    await waitFor(
      'the pool gone',
      async () =>
        await getPool(w.ns, 'gpu').then(
          () => false,
          () => true,
        ),
    ).catch(w.failWithLog);
    expect(await registered(w.s, w.ns, 'gpu')).toEqual([]);
    expect((await w.s.anon.as(token).get('/api/v1/ci/queue')).status).toBe(401);
    await waitFor(
      'its objects collected',
      async () =>
        (
          await kubectlOk([
            'get',
            'deployment,serviceaccount,secret,role,rolebinding',
            '-n',
            w.ns,
            '-l',
            'triad.dev/agent-pool=gpu',
            '-o',
            'name',
          ])
        ).trim() === '',
      90_000,
      500,
    );
    expect(await deploymentReplicas(w.ns, 'main')).toBe(1);
  });
});
