/**
 * The operator seen from outside, on the real control plane with a real Triad server: its probes
 * and metrics over HTTP, the Events it records on AgentPools (read back from the API server like
 * `kubectl get events`), and `kubectl scale` driving a pool through the CRD's scale subresource.
 */
import { describe, expect, test } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { CHART, clients, helmOk, kubectl, kubectlOk, waitFor } from './harness/kube.ts';
import { installCrds } from './harness/objects.ts';
import { operatorWorld } from './harness/operator-world.ts';
import { condition, createPool, deploymentReplicas, operatorPort, waitForPool } from './harness/operator.ts';

const w = operatorWorld('operator-obs');

const get = async (port: number, path: string) => {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, text: await r.text() };
};

/** The value of one sample of the operator's /metrics (undefined: absent). */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

/** The Events recorded on a pool, oldest first. */
const poolEvents = async (name: string) =>
  (
    await clients().core.listNamespacedEvent({
      namespace: w.ns,
      fieldSelector: `involvedObject.name=${name},involvedObject.kind=AgentPool`,
    })
  ).items.map((e) => ({ type: e.type, reason: e.reason, message: e.message, count: e.count }));

describe('the operator observable', () => {
  test('when the operator leads, then /healthz and /readyz answer 200 and /metrics says it leads', async () => {
    const port = await operatorPort(w.ops[0]!).catch(w.failWithLog);
    const ready = await waitFor('/readyz 200', async () => {
      const r = await get(port, '/readyz');
      return r.status === 200 ? r : undefined;
    }).catch(w.failWithLog);
    expect(JSON.parse(ready.text)).toEqual({ status: 'ok' });
    expect(await get(port, '/healthz')).toEqual({ status: 200, text: '{"status":"ok"}' });
    const m = await get(port, '/metrics');
    expect(sample(m.text, 'triad_operator_leader')).toBe(1);
    expect(sample(m.text, 'triad_operator_reconcile_errors_total{reason="ReconcileFailed"}')).toBe(0);
    expect((await get(port, '/nothing')).status).toBe(404);
  });

  test('when kubectl scales a pool, then it is pinned at that count (above maxReplicas), the scale subresource and metrics show it, and a ScaledUp Event says why; unpinned, the queue takes it back to 0', async () => {
    const port = await operatorPort(w.ops[0]!);
    await createPool(w.ns, 'pin', {
      image: 'triad:test',
      minReplicas: 0,
      maxReplicas: 2,
      scaleDownDelaySeconds: 1,
      labels: { pool: 'pin' },
    });
    await waitForPool(
      w.ns,
      'pin',
      'scaled to zero',
      (p) => condition(p, 'Ready')?.reason === 'ScaledToZero',
    ).catch(w.failWithLog);

    await kubectlOk(['scale', 'agentpool/pin', '-n', w.ns, '--replicas=3']);
    const pool = await waitForPool(
      w.ns,
      'pin',
      '3 ready agents',
      (p) => p.status?.readyReplicas === 3 && condition(p, 'Pinned')?.status === 'True',
    ).catch(w.failWithLog);
    expect(await deploymentReplicas(w.ns, 'pin')).toBe(3);
    expect(pool.status).toMatchObject({ desiredReplicas: 3, replicas: 3 });
    expect(condition(pool, 'Pinned')).toMatchObject({
      reason: 'SpecReplicas',
      message: 'spec.replicas pins the pool at 3: the queue does not scale it',
    });
    const scale = JSON.parse(
      await kubectlOk(['get', '--raw', `/apis/triad.dev/v1alpha1/namespaces/${w.ns}/agentpools/pin/scale`]),
    );
    expect(scale).toMatchObject({
      kind: 'Scale',
      spec: { replicas: 3 },
      status: { replicas: 3, selector: 'triad.dev/agent-pool=pin,app.kubernetes.io/component=agent' },
    });
    // the selector finds the agent pods (what an HPA reads their metrics by)
    const pods = await clients().core.listNamespacedPod({
      namespace: w.ns,
      labelSelector: scale.status.selector,
    });
    expect(pods.items.length).toBe(3);
    const wide = await kubectlOk(['get', 'agentpool', 'pin', '-n', w.ns, '-o', 'wide']);
    expect(wide.split('\n')[0]).toMatch(/\s+PINNED$/);
    expect(wide.split('\n')[1]).toMatch(/\s+3$/);

    expect(
      await waitFor('the ScaledUp event', async () => {
        const e = (await poolEvents('pin')).filter((x) => x.reason === 'ScaledUp');
        return e.length > 0 ? e : undefined;
      }),
    ).toEqual([
      { type: 'Normal', reason: 'ScaledUp', message: '0 → 3: spec.replicas pins the pool at 3', count: 1 },
    ]);

    const l = `{namespace="${w.ns}",pool="pin"}`;
    const m = (await get(port, '/metrics')).text;
    expect(sample(m, `triad_operator_pool_desired_replicas${l}`)).toBe(3);
    expect(sample(m, `triad_operator_pool_pinned${l}`)).toBe(1);
    expect(sample(m, `triad_operator_pool_pending${l}`)).toBe(0);
    expect(sample(m, 'triad_operator_pools')).toBeGreaterThanOrEqual(1);
    expect(sample(m, 'triad_operator_reconcile_duration_seconds_count{result="ok"}')).toBeGreaterThan(0);
    expect(sample(m, 'triad_operator_scalings_total{direction="up"}')).toBeGreaterThanOrEqual(1);

    await kubectlOk([
      'patch',
      'agentpool',
      'pin',
      '-n',
      w.ns,
      '--type=json',
      '-p',
      '[{"op":"remove","path":"/spec/replicas"}]',
    ]);
    const back = await waitForPool(
      w.ns,
      'pin',
      'back to 0',
      (p) => condition(p, 'Ready')?.reason === 'ScaledToZero' && p.status?.replicas === 0,
    ).catch(w.failWithLog);
    expect(condition(back, 'Pinned')).toMatchObject({ status: 'False', reason: 'QueueScaling' });
    expect(await deploymentReplicas(w.ns, 'pin')).toBe(0);
    const down = await waitFor('the ScaledDown event', async () => {
      const e = (await poolEvents('pin')).filter((x) => x.reason === 'ScaledDown');
      return e.length > 1 ? e : undefined;
    });
    // above maxReplicas: down to it at once; the rest after the delay
    expect(down.map((e) => [e.type, e.message, e.count])).toEqual([
      [
        'Normal',
        '3 → 2: 0 pipelines waiting and 0 running, capacity 2 per agent, at most 2 (maxReplicas)',
        1,
      ],
      [
        'Normal',
        '2 → 0: 0 pipelines waiting and 0 running, capacity 2 per agent, after 1 s with less work',
        1,
      ],
    ]);
  });

  test('when a pool is invalid, then an InvalidSpec Warning Event names the problem and the errors counter counts it', async () => {
    const port = await operatorPort(w.ops[0]!);
    await createPool(w.ns, 'spaced', { image: 'triad:test', labels: { pool: 'a b' } });
    const events = await waitFor('the InvalidSpec event', async () => {
      const e = await poolEvents('spaced');
      return e.length > 0 ? e : undefined;
    }).catch(w.failWithLog);
    expect(events).toEqual([
      {
        type: 'Warning',
        reason: 'InvalidSpec',
        message: 'labels: invalid value "a b" of label pool',
        count: 1,
      },
    ]);
    const m = (await get(port, '/metrics')).text;
    expect(sample(m, 'triad_operator_reconcile_errors_total{reason="InvalidSpec"}')).toBeGreaterThanOrEqual(
      1,
    );
  });

  test('when the chart runs the operator with monitoring on, then its container has the probes and metrics port, a PodMonitor scrapes it and its rules allow Events', async () => {
    const docs = parseAllDocuments(
      await helmOk([
        ...['template', 't', CHART, '-n', w.ns, '--set', 'agent.mode=operator'],
        ...['--set', 'secrets.adminToken=x', '--set', 'metrics.podMonitor.enabled=true'],
      ]),
    ).map((d) => d.toJS());
    const find = (kind: string, name: string) =>
      docs.find((d) => d?.kind === kind && d.metadata?.name === name);
    const c = find('Deployment', 't-triad-operator').spec.template.spec.containers[0];
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 9090 }]);
    expect(c.env).toContainEqual({ name: 'TRIAD_OPERATOR_METRICS_PORT', value: '9090' });
    expect(c.livenessProbe).toMatchObject({
      httpGet: { path: '/healthz', port: 'metrics' },
      periodSeconds: 20,
    });
    expect(c.readinessProbe).toMatchObject({
      httpGet: { path: '/readyz', port: 'metrics' },
      periodSeconds: 10,
    });
    expect(find('PodMonitor', 't-triad-operator').spec).toEqual({
      selector: {
        matchLabels: {
          'app.kubernetes.io/name': 'triad',
          'app.kubernetes.io/instance': 't',
          'app.kubernetes.io/component': 'operator',
        },
      },
      podMetricsEndpoints: [{ port: 'metrics', path: '/metrics', interval: '30s' }],
    });
    // namespaced by default: the Role in the namespace it serves
    const served = docs.find(
      (d) => d?.kind === 'Role' && d.metadata?.name === 't-triad-operator' && d.metadata?.namespace === w.ns,
    );
    expect(served.rules).toContainEqual({
      apiGroups: [''],
      resources: ['events'],
      verbs: ['create', 'patch'],
    });
    // the API server accepts both as they are (the Prometheus operator's CRD validates the PodMonitor)
    await installCrds();
    const input = [find('Deployment', 't-triad-operator'), find('PodMonitor', 't-triad-operator')]
      .map((d) => JSON.stringify(d))
      .join('\n');
    const r = await kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], { input });
    expect([r.code, r.stderr]).toEqual([0, '']);
  });
});
