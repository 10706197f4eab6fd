/**
 * The kubernetes executor's shared pod watch keeps no waiter once it has answered: a step
 * waits on its pod about twice a second for as long as it runs, so every wait that ends (by a
 * change, its time, or a cancellation) must leave nothing behind.
 */
import { describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { PodWatch } from '../../agent/executors/pod-watch.ts';
import { Cancelled } from '../../agent/executors/kubernetes-io.ts';

function podWatch(): PodWatch {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'http://127.0.0.1:9' }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return new PodWatch({
    kubeConfig: kc,
    namespace: 'steps',
    labelSelector: 'app.kubernetes.io/managed-by=triad-agent',
    pollMs: 10,
    resyncMs: 1000,
    warn: () => undefined,
  });
}

describe('waiting on a pod', () => {
  test('when waits end by their time or by a cancellation, then no waiter is left', async () => {
    const w = podWatch();
    const signal = new AbortController().signal;
    for (let i = 0; i < 50; i += 1) await w.changed('triad-p1-s1-a', 1, signal);
    expect(w.waiting).toBe(0);
    const stop = new AbortController();
    const waits = [
      w.changed('triad-p1-s1-a', 60_000, stop.signal),
      w.changed('triad-p1-s2-b', 60_000, stop.signal),
    ];
    expect(w.waiting).toBe(2);
    stop.abort();
    for (const p of waits) await expect(p).rejects.toBeInstanceOf(Cancelled);
    expect(w.waiting).toBe(0);
  });
});
