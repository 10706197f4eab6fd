/**
 * The chart's storage.mode against the real API server. `nodes` (charts/triad/ci/storage-nodes-values.yaml)
 * installed with `helm --wait` into a namespace enforcing the restricted Pod Security profile: the
 * storage nodes' StatefulSet (a ReadWriteOnce claim per node, which the kwok provisioner binds),
 * its headless Service, API servers without a repository volume, the PodDisruptionBudgets; then
 * scaled by an upgrade that keeps the storage secret, and uninstalled leaving only the
 * nodes' volumes. And what `helm template` refuses or chooses: no external database or object
 * store in nodes mode, the update strategy of the server Deployment in local mode.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { PolicyV1Api, type V1Container, type V1EnvVar } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { CHART, clients, cluster, deleteNamespace, helm, helmOk, newNamespace } from './harness/kube.ts';
import { everythingIn, installCrds, waitUntilOnly } from './harness/objects.ts';

const NODES = path.join(CHART, 'ci', 'storage-nodes-values.yaml');
const DB = 'database.url=postgres://u:p@db.example.org/triad';
const S3 = ['s3.endpoint=minio.example.org:9000', 's3.accessKey=a', 's3.secretKey=b'];
const made: string[] = [];

beforeAll(async () => {
  await installCrds();
});
afterAll(async () => {
  for (const n of made) await deleteNamespace(n);
});

type Doc = { kind: string; metadata: { name: string }; spec?: any };

/** `helm template` with --set values, as objects. */
async function render(...set: string[]): Promise<Doc[]> {
  const out = await helmOk(['template', 't', CHART, ...set.flatMap((s) => ['--set', s])]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Doc | null)
    .filter((d): d is Doc => d !== null);
}

function one(docs: Doc[], kind: string, name: string): Doc {
  const d = docs.find((x) => x.kind === kind && x.metadata.name === name);
  if (d === undefined) throw new Error(`no ${kind}/${name} in ${docs.map((x) => x.kind).join(', ')}`);
  return d;
}

function envOf(c: V1Container | undefined): Map<string, V1EnvVar> {
  return new Map((c?.env ?? []).map((e) => [e.name, e]));
}

function expectAdmitted(out: { stderr: string; stdout: string }) {
  expect(`${out.stderr}\n${out.stdout}`).not.toMatch(/PodSecurity|violate/i);
}

async function storageSecret(ns: string): Promise<string> {
  const s = await clients().core.readNamespacedSecret({ name: 's-triad', namespace: ns });
  return Buffer.from(s.data?.['storage-secret'] ?? '', 'base64').toString();
}

describe('storage.mode with helm template', () => {
  test('when storage.mode=nodes lacks an external database or object store, then rendering fails naming the value to set', async () => {
    const noDb = await helm(['template', 't', CHART, '--set', 'storage.mode=nodes']);
    expect(noDb.code).not.toBe(0);
    expect(noDb.stderr).toMatch(/storage.mode=nodes needs an external PostgreSQL.*: set database.url/);
    const noS3 = await helm(['template', 't', CHART, '--set', 'storage.mode=nodes', '--set', DB]);
    expect(noS3.code).not.toBe(0);
    expect(noS3.stderr).toMatch(/storage.mode=nodes needs an object store: set s3.endpoint/);
    const bad = await helm(['template', 't', CHART, '--set', 'storage.mode=shards']);
    expect(bad.stderr).toMatch(/schema[\s\S]*storage.mode/);
    // an existing Secret holds the database URL: accepted, and the migration hook then runs too
    const existing = await render('storage.mode=nodes', 'secrets.existingSecret=mine', ...S3);
    expect(existing.filter((d) => d.kind === 'Secret')).toEqual([]);
    expect(one(existing, 'Job', 't-triad-migrate').spec.template.spec.containers[0].env[0]).toEqual({
      name: 'DATABASE_URL',
      valueFrom: { secretKeyRef: { name: 'mine', key: 'database-url' } },
    });
    await helmOk(['lint', '--strict', CHART, '-f', NODES]);
  });

  test('when the repository volume is ReadWriteOnce (local mode), then the server Deployment updates by Recreate; with ReadWriteMany or no volume it rolls', async () => {
    const cases: [string[], string, string | undefined][] = [
      [[], 'Recreate', 'ReadWriteOnce'], // embedded database
      [[DB], 'Recreate', 'ReadWriteOnce'], // one replica: ReadWriteOnce by default
      [[DB, 'server.replicas=2', 'persistence.accessMode=ReadWriteOnce'], 'Recreate', 'ReadWriteOnce'],
      [[DB, 'persistence.accessMode=ReadWriteOncePod'], 'Recreate', 'ReadWriteOncePod'],
      [[DB, 'persistence.existingClaim=mine', 'persistence.accessMode=ReadWriteOnce'], 'Recreate', undefined],
      [[DB, 'server.replicas=2'], 'RollingUpdate', 'ReadWriteMany'],
      [[DB, 'persistence.accessMode=ReadWriteMany'], 'RollingUpdate', 'ReadWriteMany'],
      [[DB, 'persistence.enabled=false'], 'RollingUpdate', undefined],
    ];
    for (const [set, strategy, mode] of cases) {
      const docs = await render(...set);
      const server = one(docs, 'Deployment', 't-triad');
      const pvc = docs.find((d) => d.kind === 'PersistentVolumeClaim');
      expect([set, server.spec.strategy?.type ?? 'RollingUpdate', pvc?.spec.accessModes[0]]).toEqual([
        set,
        strategy,
        mode,
      ]);
    }
    const rwop = await helm([
      ...['template', 't', CHART, '--set', DB],
      ...['--set', 'server.replicas=2', '--set', 'persistence.accessMode=ReadWriteOncePod'],
    ]);
    expect(rwop.code).not.toBe(0);
    expect(rwop.stderr).toMatch(/ReadWriteOncePod admits a single pod/);
  });

  test('when server.replicas is left empty, then it is 1 in local mode and 2 in nodes mode, with budgets only where there is more than one', async () => {
    const pdbs = (docs: Doc[]) =>
      docs.filter((d) => d.kind === 'PodDisruptionBudget').map((d) => d.metadata.name);
    const local = await render();
    expect(one(local, 'Deployment', 't-triad').spec.replicas).toBe(1);
    expect(pdbs(local)).toEqual([]);
    const nodes = await render('storage.mode=nodes', DB, ...S3);
    expect(one(nodes, 'Deployment', 't-triad').spec.replicas).toBe(2);
    expect(pdbs(nodes)).toEqual(['t-triad', 't-triad-storage']);
    expect(nodes.filter((d) => d.kind === 'PersistentVolumeClaim')).toEqual([]);
    const single = await render(
      ...['storage.mode=nodes', DB, ...S3, 'server.replicas=1', 'storage.nodes.replicas=1'],
    );
    expect(pdbs(single)).toEqual([]);
    const forced = await render(
      ...['storage.mode=nodes', DB, ...S3, 'server.podDisruptionBudget.enabled=false'],
    );
    expect(pdbs(forced)).toEqual(['t-triad-storage']);
  });
});

describe('helm install with storage.mode=nodes', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await newNamespace('chart-storage');
    made.push(ns);
  });

  test('when installed in a restricted namespace, then the storage nodes, their headless Service and volumes, and servers without a repository volume are admitted and run', async () => {
    const r = await helm(['install', 's', CHART, '-n', ns, '-f', NODES, '--wait', '--timeout', '3m']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expectAdmitted(r);
    const { apps, core } = clients();
    const pods = await core.listNamespacedPod({
      namespace: ns,
      labelSelector: 'app.kubernetes.io/instance=s',
    });
    expect(
      pods.items
        .map(
          (p) =>
            `${p.metadata?.labels?.['app.kubernetes.io/component']}@${cluster().nodes.includes(p.spec?.nodeName ?? '') ? 'kwok' : p.spec?.nodeName} ${p.status?.phase}`,
        )
        .sort(),
    ).toEqual([
      'agent@kwok Running',
      'server@kwok Running',
      'server@kwok Running',
      'storage@kwok Running',
      'storage@kwok Running',
    ]);
    const objects = await everythingIn(ns);
    expect(objects).toEqual(
      expect.arrayContaining([
        'deployment.apps/s-triad',
        'statefulset.apps/s-triad-storage',
        'service/s-triad',
        'service/s-triad-storage',
        'poddisruptionbudget.policy/s-triad',
        'poddisruptionbudget.policy/s-triad-storage',
        'networkpolicy.networking.k8s.io/s-triad-storage',
        'servicemonitor.monitoring.coreos.com/s-triad-storage',
        'persistentvolumeclaim/repos-s-triad-storage-0',
        'persistentvolumeclaim/repos-s-triad-storage-1',
      ]),
    );
    expect(objects.filter((o) => o.startsWith('persistentvolumeclaim/s-triad'))).toEqual([]);
    expect(await storageSecret(ns)).toBe('nodes-storage-secret');

    // the headless Service: every node by name, ready or not
    const svc = await core.readNamespacedService({ name: 's-triad-storage', namespace: ns });
    expect(svc.spec).toMatchObject({ clusterIP: 'None', publishNotReadyAddresses: true });
    expect(svc.spec?.ports?.map((p) => `${p.name} ${p.port}`)).toEqual(['storage 3100']);

    // the StatefulSet: a ReadWriteOnce claim per node with the size and class, mounted at TRIAD_REPO_DIR
    const sts = await apps.readNamespacedStatefulSet({ name: 's-triad-storage', namespace: ns });
    expect(sts.spec).toMatchObject({
      serviceName: 's-triad-storage',
      podManagementPolicy: 'Parallel',
      replicas: 2,
    });
    expect(
      sts.spec?.volumeClaimTemplates?.map((c) => ({
        name: c.metadata?.name,
        ...c.spec,
        volumeMode: undefined,
      })),
    ).toEqual([
      {
        name: 'repos',
        accessModes: ['ReadWriteOnce'],
        storageClassName: 'kwok',
        resources: { requests: { storage: '5Gi' } },
        volumeMode: undefined,
      },
    ]);
    const node = sts.spec?.template.spec?.containers[0];
    const nodeEnv = envOf(node);
    expect(node?.args).toEqual(['storage']);
    expect(node?.volumeMounts?.find((m) => m.name === 'repos')?.mountPath).toBe(
      nodeEnv.get('TRIAD_REPO_DIR')?.value,
    );
    expect(nodeEnv.get('TRIAD_STORAGE_ADDRESS')?.value).toBe(
      `http://$(POD_NAME).s-triad-storage.${ns}.svc:3100`,
    );
    expect(nodeEnv.get('POD_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    expect(nodeEnv.get('TRIAD_STORAGE_PORT')?.value).toBe('3100');
    expect(nodeEnv.get('TRIAD_STORAGE_SECRET')?.valueFrom?.secretKeyRef?.key).toBe('storage-secret');
    expect(nodeEnv.get('DATABASE_URL')?.valueFrom?.secretKeyRef?.key).toBe('database-url');
    expect(nodeEnv.get('TRIAD_S3_ENDPOINT')?.value).toBe('minio.example.org:9000');
    expect(nodeEnv.get('TRIAD_S3_SECRET_KEY')?.valueFrom?.secretKeyRef?.key).toBe('s3-secret-key');
    expect(nodeEnv.get('TRIAD_HG_WORKERS')?.value).toBe('2');
    expect([node?.livenessProbe?.httpGet, node?.readinessProbe?.httpGet]).toEqual([
      { path: '/healthz', port: 'storage', scheme: 'HTTP' },
      { path: '/readyz', port: 'storage', scheme: 'HTTP' },
    ]);

    // the API servers: no repository volume, repositories on the nodes, the same backend settings
    const dep = await apps.readNamespacedDeployment({ name: 's-triad', namespace: ns });
    const podSpec = dep.spec?.template.spec;
    expect(dep.spec?.replicas).toBe(2);
    expect(podSpec?.volumes?.filter((v) => v.persistentVolumeClaim !== undefined)).toEqual([]);
    expect(podSpec?.containers[0]?.volumeMounts?.map((m) => m.mountPath).sort()).toEqual(['/data', '/tmp']);
    const serverEnv = envOf(podSpec?.containers[0]);
    expect(serverEnv.get('TRIAD_STORAGE')?.value).toBe('nodes');
    expect(serverEnv.get('TRIAD_STORAGE_SECRET')?.valueFrom?.secretKeyRef?.key).toBe('storage-secret');
    expect(serverEnv.has('TRIAD_REPO_DIR')).toBe(false);
    expect(serverEnv.get('TRIAD_HG_WORKERS')?.value).toBe('2');
    expect(sts.spec?.template.spec?.securityContext).toEqual(podSpec?.securityContext);
    expect(node?.securityContext).toEqual(podSpec?.containers[0]?.securityContext);

    const policy = clients().kc.makeApiClient(PolicyV1Api);
    const { items: budgets } = await policy.listNamespacedPodDisruptionBudget({ namespace: ns });
    expect(budgets.map((b) => `${b.metadata?.name} ${b.spec?.maxUnavailable}`).sort()).toEqual([
      's-triad 1',
      's-triad-storage 1',
    ]);
    const claims = await core.listNamespacedPersistentVolumeClaim({ namespace: ns });
    expect(claims.items.map((c) => `${c.metadata?.name} ${c.status?.phase}`).sort()).toEqual([
      'repos-s-triad-storage-0 Bound',
      'repos-s-triad-storage-1 Bound',
    ]);
  });

  test('when upgraded with a third node, then it gets its own volume and the storage secret stays', async () => {
    const before = await storageSecret(ns);
    const r = await helm([
      ...['upgrade', 's', CHART, '-n', ns, '--reuse-values', '--set', 'storage.nodes.replicas=3'],
      ...['--wait', '--timeout', '3m'],
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(await storageSecret(ns)).toBe(before);
    const sts = await clients().apps.readNamespacedStatefulSet({ name: 's-triad-storage', namespace: ns });
    expect(sts.status?.readyReplicas).toBe(3);
    expect(await everythingIn(ns)).toContain('persistentvolumeclaim/repos-s-triad-storage-2');
  });

  test("when uninstalled, then only the storage nodes' volumes are left (kept on purpose)", async () => {
    await helmOk(['uninstall', 's', '-n', ns, '--wait', '--timeout', '2m']);
    await waitUntilOnly(
      ns,
      [0, 1, 2].map((i) => `persistentvolumeclaim/repos-s-triad-storage-${i}`),
    );
  });
});
