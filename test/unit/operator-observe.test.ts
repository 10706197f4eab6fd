import { describe, expect, test } from '@jest/globals';
import { formatLabels } from '../../src/pipelines/labels.ts';
import { EventDeduper, scaleMessage } from '../../src/operator/events.ts';
import { health, OperatorMetrics } from '../../src/operator/observe.ts';
import { deployment } from '../../src/operator/resources.ts';
import { agentSelector } from '../../src/operator/scaling.ts';
import type { AgentPool } from '../../src/operator/types.ts';

const ok = { synced: true, leader: true, electionOk: true };

describe('operator probes', () => {
  test('liveness fails once a reconcile or the election loop has hung for longer than the limit', () => {
    expect(health({ ...ok, reconcilingSince: 1000, electionTick: 1000 }, 60_000, 60_000)).toEqual({
      live: [],
      ready: [],
    });
    const stuck = health({ ...ok, reconcilingSince: 0, electionTick: 500_000 }, 500_000, 300_000);
    expect(stuck.live).toEqual(['a reconcile has been running for 500 s']);
    expect(stuck.ready).toEqual(stuck.live);
    expect(health({ ...ok, electionTick: 0 }, 400_000, 300_000).live).toEqual([
      'leader election last ran 400 s ago',
    ]);
  });

  test('readiness: the leader once its watch has synced, a standby while the election reaches the API server', () => {
    expect(health({ ...ok, synced: false }, 0, 1000)).toEqual({
      live: [],
      ready: ['leader: the pool watch has not synced yet'],
    });
    expect(health({ synced: false, leader: false, electionOk: true }, 0, 1000)).toEqual({
      live: [],
      ready: [],
    });
    expect(health({ synced: false, leader: false, electionOk: false }, 0, 1000).ready).toEqual([
      'standby: leader election cannot reach the API server',
    ]);
  });

  test('the endpoints answer over HTTP with the pool gauges, and a failing probe is a 503 naming the problem', async () => {
    const m = new OperatorMetrics();
    let problems: string[] = [];
    await m.serve(0, () => ({ live: [], ready: problems }));
    try {
      const at = (path: string) => fetch(`http://127.0.0.1:${m.port}${path}`);
      m.setPool(
        'ci',
        'linux',
        { desiredReplicas: 3, replicas: 2, readyReplicas: 1, pending: 5, running: 1 },
        true,
      );
      m.reconcileErrors.inc({ reason: 'InvalidSpec' });
      // one controller per watched namespace: the pools of all of them
      m.countPools(() => 2);
      m.countPools(() => 3);
      const text = await (await at('/metrics')).text();
      for (const line of [
        'triad_operator_pool_desired_replicas{namespace="ci",pool="linux"} 3',
        'triad_operator_pool_replicas{namespace="ci",pool="linux"} 2',
        'triad_operator_pool_ready_replicas{namespace="ci",pool="linux"} 1',
        'triad_operator_pool_pending{namespace="ci",pool="linux"} 5',
        'triad_operator_pool_running{namespace="ci",pool="linux"} 1',
        'triad_operator_pool_pinned{namespace="ci",pool="linux"} 1',
        'triad_operator_reconcile_errors_total{reason="InvalidSpec"} 1',
        'triad_operator_reconcile_errors_total{reason="ReconcileFailed"} 0',
        'triad_operator_leader 0',
        'triad_operator_pools 5',
      ])
        expect(text.split('\n')).toContain(line);
      expect(text).toMatch(/^triad_operator_process_cpu_seconds_total [0-9.]+$/m);
      m.forgetPool('ci', 'linux');
      expect(await (await at('/metrics')).text()).not.toMatch(/pool="linux"/);
      expect((await at('/readyz')).status).toBe(200);
      problems = ['leader: the pool watch has not synced yet'];
      const r = await at('/readyz');
      expect(r.status).toBe(503);
      expect(await r.json()).toEqual({ status: 'failing', problems });
      expect((await at('/healthz')).status).toBe(200);
    } finally {
      await m.close();
    }
  });
});

describe('operator events', () => {
  const e = (reason: string, message: string, warning = true) => ({
    object: 'uid-1',
    reason,
    message,
    warning,
  });

  test('a repeat within the window is only counted; after it the Event is patched with the count', () => {
    const d = new EventDeduper(60_000, 3_000_000);
    expect(d.decide(e('ReconcileFailed', 'boom'), 0)).toEqual({ kind: 'create' });
    d.created(e('ReconcileFailed', 'boom'), 'p.1');
    expect(d.decide(e('ReconcileFailed', 'boom'), 10_000)).toEqual({ kind: 'skip' });
    expect(d.decide(e('ReconcileFailed', 'boom'), 20_000)).toEqual({ kind: 'skip' });
    expect(d.decide(e('ReconcileFailed', 'boom'), 61_000)).toEqual({ kind: 'patch', name: 'p.1', count: 4 });
    // another pool is another object
    expect(d.decide({ ...e('ReconcileFailed', 'boom'), object: 'uid-2' }, 62_000)).toEqual({
      kind: 'create',
    });
  });

  test('a Warning with another message of the same reason waits for the window; Normal events do not', () => {
    const d = new EventDeduper(60_000, 3_000_000);
    expect(d.decide(e('RegistrationFailed', 'a'), 0)).toEqual({ kind: 'create' });
    expect(d.decide(e('RegistrationFailed', 'b'), 30_000)).toEqual({ kind: 'skip' });
    expect(d.decide(e('RegistrationFailed', 'c'), 60_000)).toEqual({ kind: 'create' });
    expect(d.decide(e('ScaledUp', '0 → 1', false), 0)).toEqual({ kind: 'create' });
    expect(d.decide(e('ScaledUp', '1 → 2', false), 1000)).toEqual({ kind: 'create' });
  });

  test('an Event older than what the API server keeps, or never created, is created again', () => {
    const d = new EventDeduper(60_000, 600_000);
    d.decide(e('InvalidSpec', 'x'), 0);
    d.created(e('InvalidSpec', 'x'), 'p.1');
    expect(d.decide(e('InvalidSpec', 'x'), 700_000)).toEqual({ kind: 'create' });
    d.created(e('InvalidSpec', 'x'), undefined);
    expect(d.decide(e('InvalidSpec', 'x'), 800_000)).toEqual({ kind: 'create' });
  });

  test('scale messages give the figures behind the decision', () => {
    const c = { capacity: 2, min: 0, max: 5, busy: 0, delaySeconds: 300 };
    expect(scaleMessage(2, 4, { ...c, figures: { pending: 7, running: 0 } })).toBe(
      '2 → 4: 7 pipelines waiting and 0 running, capacity 2 per agent',
    );
    expect(scaleMessage(2, 5, { ...c, figures: { pending: 20, running: 1 } })).toBe(
      '2 → 5: 20 pipelines waiting and 1 running, capacity 2 per agent, at most 5 (maxReplicas)',
    );
    expect(scaleMessage(4, 3, { ...c, busy: 3, figures: { pending: 0, running: 3 } })).toBe(
      '4 → 3: 0 pipelines waiting and 3 running, capacity 2 per agent, 3 agents busy, after 300 s with less work',
    );
    expect(scaleMessage(3, 1, { ...c, min: 1, figures: { pending: 0, running: 0 } })).toBe(
      '3 → 1: 0 pipelines waiting and 0 running, capacity 2 per agent, at least 1 (minReplicas), after 300 s with less work',
    );
    // unpinned above maxReplicas: down to it at once
    expect(scaleMessage(8, 5, { ...c, figures: { pending: 0, running: 0 } })).toBe(
      '8 → 5: 0 pipelines waiting and 0 running, capacity 2 per agent, at most 5 (maxReplicas)',
    );
    expect(scaleMessage(0, 1, { ...c, min: 1 })).toBe(
      '0 → 1: minReplicas 1, maxReplicas 5 (the queue figures are not known yet)',
    );
    expect(scaleMessage(1, 9, { ...c, pinned: 9, figures: { pending: 1, running: 0 } })).toBe(
      '1 → 9: spec.replicas pins the pool at 9',
    );
  });
});

test("the scale subresource's selector is the agents Deployment's selector", () => {
  const pool = { metadata: { name: 'gpu', namespace: 'ci', uid: 'u' }, spec: { image: 'i' } } as AgentPool;
  expect(agentSelector(pool).split(',').sort().join(',')).toBe(
    formatLabels(deployment(pool, 1, 'http://x').spec!.selector.matchLabels!),
  );
});
