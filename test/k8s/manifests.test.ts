/**
 * The plain manifests/ against the real API server: every file applied with strict field
 * validation from another current namespace, every pod admitted by the restricted Pod Security
 * profile of the `triad` namespace and running on kwok nodes (the storage nodes of storage.yaml
 * with a volume each, bound by the kwok provisioner), and nothing left once deleted.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { ROOT, clients, cluster, deleteNamespace, kubectl, kubectlOk, waitFor } from './harness/kube.ts';
import { everythingIn, installCrds } from './harness/objects.ts';

const DIR = path.join(ROOT, 'manifests');
const NS = 'triad';
const STEPS = 'triad-steps';
const files = fs
  .readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => path.join(DIR, f));

beforeAll(async () => {
  await installCrds();
});
afterAll(async () => {
  await deleteNamespace(NS);
  await deleteNamespace(STEPS);
});

describe('plain manifests', () => {
  test('when every file is applied from the default namespace, then all objects are accepted in "triad" and every pod runs under the restricted profile', async () => {
    expect(files.map((f) => path.basename(f))).toContain('00-namespace.yaml');
    // the namespace first (its file sorts first, but one apply call may race the namespace's creation)
    await kubectlOk(['apply', '--validate=strict', '-f', files[0]!]);
    for (const ns of [NS, STEPS])
      await waitFor(`service account default in ${ns}`, async () => {
        await clients().core.readNamespacedServiceAccount({ name: 'default', namespace: ns });
        return true;
      });
    const r = await kubectl(['apply', '--validate=strict', ...files.slice(1).flatMap((f) => ['-f', f])]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const labels = (await clients().core.readNamespace({ name: NS })).metadata?.labels;
    expect(labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    expect(await everythingIn('default')).toEqual(['service/kubernetes']);
    // step pods' objects are in their own namespace, the agent's Role there only
    expect(await everythingIn(STEPS)).toEqual([
      'networkpolicy.networking.k8s.io/triad-agent-steps',
      'role.rbac.authorization.k8s.io/triad-agent',
      'rolebinding.rbac.authorization.k8s.io/triad-agent',
    ]);
    expect((await everythingIn(NS)).filter((o) => o.startsWith('role'))).toEqual([]);
    // what the executor does there, reading why a step pod waits (its Events) included
    const agent = `system:serviceaccount:${NS}:triad-agent`;
    const can = async (...a: string[]) =>
      (await kubectl(['auth', 'can-i', ...a, '--as', agent])).stdout.trim();
    for (const verb of ['create', 'watch', 'delete'])
      expect(await can(verb, 'pods', '-n', STEPS)).toBe('yes');
    for (const verb of ['list', 'watch']) expect(await can(verb, 'events', '-n', STEPS)).toBe('yes');
    expect(await can('create', 'pods', '-n', NS)).toBe('no');
    expect(await everythingIn(NS)).toEqual(
      expect.arrayContaining([
        'deployment.apps/postgres',
        'deployment.apps/triad',
        'deployment.apps/triad-agent',
        'horizontalpodautoscaler.autoscaling/triad-agent',
        'job.batch/triad-migrate',
        'poddisruptionbudget.policy/triad',
        'podmonitor.monitoring.coreos.com/triad-agent',
        'scaledobject.keda.sh/triad-agent',
        'servicemonitor.monitoring.coreos.com/triad',
        'triggerauthentication.keda.sh/triad-agent',
        'statefulset.apps/triad-storage',
        'service/triad-storage',
        'poddisruptionbudget.policy/triad-storage',
        'networkpolicy.networking.k8s.io/triad-storage',
      ]),
    );
    const { apps, batch } = clients();
    for (const name of ['postgres', 'triad', 'triad-agent'])
      await waitFor(`deployment ${name} available`, async () => {
        const d = await apps.readNamespacedDeployment({ name, namespace: NS });
        return (d.status?.availableReplicas ?? 0) === (d.spec?.replicas ?? 1);
      });
    await waitFor('statefulset triad-storage ready', async () => {
      const s = await apps.readNamespacedStatefulSet({ name: 'triad-storage', namespace: NS });
      return (s.status?.readyReplicas ?? 0) === 2;
    });
    // one ReadWriteOnce claim per node, from the volume claim template, bound
    const claims = await clients().core.listNamespacedPersistentVolumeClaim({
      namespace: NS,
      labelSelector: 'app.kubernetes.io/component=storage',
    });
    expect(
      claims.items
        .map((c) => `${c.metadata?.name} ${c.spec?.accessModes?.join(',')} ${c.status?.phase}`)
        .sort(),
    ).toEqual(['repos-triad-storage-0 ReadWriteOnce Bound', 'repos-triad-storage-1 ReadWriteOnce Bound']);
    await waitFor('the migration job to complete', async () => {
      const j = await batch.readNamespacedJob({ name: 'triad-migrate', namespace: NS });
      return (j.status?.succeeded ?? 0) === 1;
    });
    const pods = await clients().core.listNamespacedPod({ namespace: NS });
    expect(pods.items.every((p) => cluster().nodes.includes(p.spec?.nodeName ?? ''))).toBe(true);
    expect(
      pods.items
        .map((p) => p.metadata?.labels?.app ?? p.metadata?.labels?.['app.kubernetes.io/component'])
        .sort(),
    ).toEqual(['agent', 'migrations', 'postgres', 'server', 'storage', 'storage']);
  });

  test('when every file is deleted, then nothing is left', async () => {
    await kubectlOk([
      'delete',
      '--wait',
      '--ignore-not-found',
      ...[...files].reverse().flatMap((f) => ['-f', f]),
    ]);
    await waitFor(
      'namespace triad to be gone',
      async () => {
        try {
          await clients().core.readNamespace({ name: NS });
          return false;
        } catch {
          return true;
        }
      },
      90_000,
      500,
    );
  });
});
