/**
 * The chart's database pool values (docs/operations.md, "PostgreSQL behind a pooler"):
 * database.poolMode and database.poolMax as DATABASE_POOL_MODE and TRIAD_DB_POOL_MAX, and
 * database.directUrl as DATABASE_DIRECT_URL from the secret key database-direct-url, on the
 * server, the migration Job and the storage nodes; transaction mode without a direct URL refused
 * at render; the rendered objects accepted by the real API server.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import type { V1EnvVar } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { CHART, deleteNamespace, helm, helmOk, kubectlOk, newNamespace } from './harness/kube.ts';

const POOLED = [
  'database.url=postgres://u:p@pgbouncer.example.org:6432/triad',
  'database.directUrl=postgres://u:p@db.example.org:5432/triad',
  'database.poolMode=transaction',
  'database.poolMax=40',
];
const made: string[] = [];

afterAll(async () => {
  for (const n of made) await deleteNamespace(n);
});

type Doc = {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: any;
  stringData?: Record<string, string>;
};

async function rendered(...set: string[]): Promise<{ docs: Doc[] }> {
  const yaml = await helmOk(['template', 't', CHART, ...set.flatMap((s) => ['--set', s])]);
  const docs = parseAllDocuments(yaml)
    .map((d) => d.toJS() as Doc | null)
    .filter((d): d is Doc => d !== null);
  return { docs };
}

function envOf(docs: Doc[], kind: string, name: string): Map<string, V1EnvVar> {
  const d = docs.find((x) => x.kind === kind && x.metadata.name === name);
  if (d === undefined) throw new Error(`no ${kind}/${name}`);
  const c = d.spec.template.spec.containers[0] as { env?: V1EnvVar[] };
  return new Map((c.env ?? []).map((e) => [e.name, e]));
}

const pick = (env: Map<string, V1EnvVar>) =>
  ['DATABASE_POOL_MODE', 'TRIAD_DB_POOL_MAX', 'DATABASE_DIRECT_URL'].map((n) => env.get(n));

describe('database pool values', () => {
  test('when the database sits behind a transaction-mode pooler, then the server, the migration Job and the storage nodes get the pool mode, the pool size and the direct URL from the secret, and the API server accepts the objects', async () => {
    const { docs } = await rendered(...POOLED);
    const server = envOf(docs, 'Deployment', 't-triad');
    expect(pick(server)).toEqual([
      { name: 'DATABASE_POOL_MODE', value: 'transaction' },
      { name: 'TRIAD_DB_POOL_MAX', value: '40' },
      {
        name: 'DATABASE_DIRECT_URL',
        valueFrom: { secretKeyRef: { name: 't-triad', key: 'database-direct-url', optional: false } },
      },
    ]);
    const job = envOf(docs, 'Job', 't-triad-migrate');
    expect(pick(job)[2]).toEqual({
      name: 'DATABASE_DIRECT_URL',
      valueFrom: { secretKeyRef: { name: 't-triad-migrate', key: 'database-direct-url', optional: false } },
    });
    expect(job.get('DATABASE_POOL_MODE')?.value).toBe('transaction');
    // the migration hook's own Secret carries the direct URL beside the pooled one
    const hookSecret = docs.find((d) => d.kind === 'Secret' && d.metadata.name === 't-triad-migrate');
    expect(hookSecret?.stringData).toMatchObject({
      'database-url': 'postgres://u:p@pgbouncer.example.org:6432/triad',
      'database-direct-url': 'postgres://u:p@db.example.org:5432/triad',
    });
    const ns = await newNamespace('chart-db');
    made.push(ns);
    // the objects that carry the variables, in a namespace of the test's own (as JSON: YAML 1.1
    // would read a value such as "off" back as a boolean)
    const items = docs
      .filter(
        (d) => ['Deployment', 'Job', 'Secret'].includes(d.kind) && d.metadata.name.startsWith('t-triad'),
      )
      .map((d) => ({ ...d, metadata: { ...d.metadata, namespace: ns } }));
    await kubectlOk(['apply', '--dry-run=server', '--validate=strict', '-n', ns, '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items }),
    });

    const nodes = await rendered(
      ...POOLED,
      'storage.mode=nodes',
      's3.endpoint=minio.example.org:9000',
      's3.accessKey=a',
      's3.secretKey=b',
    );
    const node = envOf(nodes.docs, 'StatefulSet', 't-triad-storage');
    expect(pick(node).map((e) => e?.name)).toEqual([
      'DATABASE_POOL_MODE',
      'TRIAD_DB_POOL_MAX',
      'DATABASE_DIRECT_URL',
    ]);
  });

  test('when transaction mode has no direct URL, then rendering fails naming database.directUrl; an existing Secret may hold it (optional key); defaults are session mode and 20', async () => {
    const r = await helm([
      'template',
      't',
      CHART,
      '--set',
      POOLED[0]!,
      '--set',
      'database.poolMode=transaction',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('database.poolMode=transaction needs database.directUrl');
    const bad = await helm(['template', 't', CHART, '--set', 'database.poolMode=pgbouncer']);
    expect(bad.stderr).toMatch(/schema[\s\S]*poolMode/);
    const existing = await rendered('secrets.existingSecret=mine', 'database.poolMode=transaction');
    expect(pick(envOf(existing.docs, 'Deployment', 't-triad'))[2]).toEqual({
      name: 'DATABASE_DIRECT_URL',
      valueFrom: { secretKeyRef: { name: 'mine', key: 'database-direct-url', optional: true } },
    });
    const plain = await rendered(POOLED[0]!);
    expect(pick(envOf(plain.docs, 'Deployment', 't-triad'))).toEqual([
      { name: 'DATABASE_POOL_MODE', value: 'session' },
      { name: 'TRIAD_DB_POOL_MAX', value: '20' },
      undefined,
    ]);
  });

  test('when the database URL comes from a Secret of the user and the direct URL is inline, then the migration hook Secret carries the direct URL (the chart Secret does not exist yet at install)', async () => {
    const { docs } = await rendered(
      'secrets.existingSecrets.databaseUrl.name=pg-app',
      'database.directUrl=postgres://u:p@db.example.org:5432/triad',
      'database.poolMode=transaction',
    );
    const hookSecret = docs.find((d) => d.kind === 'Secret' && d.metadata.name === 't-triad-migrate');
    expect(hookSecret?.stringData).toEqual({
      'database-direct-url': 'postgres://u:p@db.example.org:5432/triad',
    });
    const job = envOf(docs, 'Job', 't-triad-migrate');
    expect(job.get('DATABASE_URL')?.valueFrom?.secretKeyRef).toMatchObject({
      name: 'pg-app',
      key: 'database-url',
    });
    expect(job.get('DATABASE_DIRECT_URL')?.valueFrom?.secretKeyRef).toMatchObject({
      name: 't-triad-migrate',
      key: 'database-direct-url',
    });
  });
});
