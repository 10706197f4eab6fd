/**
 * The chart's credentials with `helm template`: nothing generated at render time (GitOps renders
 * with `helm template` or Argo CD must not change a token at every render), a refusal naming
 * every missing value at once, inline values kept in the chart's Secret, and per-credential
 * Secrets of the user's (secrets.existingSecrets.<credential>: {name, key}) followed by every
 * secretKeyRef of every template. The objects of a per-credential render are accepted by the
 * real API server.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { CHART, deleteNamespace, helm, helmOk, kubectl, newNamespace } from './harness/kube.ts';
import { installCrds } from './harness/objects.ts';
import { installAgentPoolCrd } from './harness/operator.ts';

type Doc = { kind: string; metadata: { name: string }; spec?: any; stringData?: Record<string, string> };
type Ref = { name: string; key: string };

const made: string[] = [];
beforeAll(async () => {
  await installCrds();
  await installAgentPoolCrd();
});
afterAll(async () => {
  for (const n of made) await deleteNamespace(n);
});

const sets = (set: string[]) => set.flatMap((s) => ['--set', s]);

/** `helm template` without the tests' credentials: only what `set` gives. */
async function render(set: string[], ns = 'triad'): Promise<Doc[]> {
  const out = await helmOk(['template', 't', CHART, '-n', ns, ...sets(set)], { credentials: false });
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Doc | null)
    .filter((d): d is Doc => d !== null);
}

/** Every secret reference of the rendered objects, as `<kind>/<name> <env var>` -> {name, key}. */
function secretRefs(docs: Doc[]): Map<string, Ref> {
  const refs = new Map<string, Ref>();
  for (const d of docs) {
    const pod = d.spec?.template?.spec ?? d.spec?.jobTemplate?.spec?.template?.spec;
    for (const c of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])]) {
      for (const e of c.env ?? []) {
        const r = e.valueFrom?.secretKeyRef;
        if (r !== undefined) refs.set(`${d.kind}/${d.metadata.name} ${e.name}`, { name: r.name, key: r.key });
      }
    }
    for (const t of d.kind === 'TriggerAuthentication' ? d.spec.secretTargetRef : []) {
      refs.set(`${d.kind}/${d.metadata.name} ${t.parameter}`, { name: t.name, key: t.key });
    }
  }
  return refs;
}

const NODES = ['storage.mode=nodes', 's3.endpoint=minio.example.org:9000'];

describe('chart credentials', () => {
  test('when no credential is given, then rendering fails with one message naming every value to set', async () => {
    const bare = await helm(['template', 't', CHART], { credentials: false });
    expect(bare.code).not.toBe(0);
    expect(bare.stderr).toContain(
      'credentials missing: set secrets.agentToken (or secrets.existingSecrets.agentToken); or set secrets.existingSecret to a Secret of yours with the keys agent-token.',
    );
    const all = await helm(
      [
        ...['template', 't', CHART, ...sets([...NODES, 'database.url=postgres://u:p@db/triad'])],
        ...sets(['agent.mode=operator']),
      ],
      { credentials: false },
    );
    expect(all.code).not.toBe(0);
    expect(all.stderr).toContain(
      'credentials missing: set secrets.operatorToken (or secrets.existingSecrets.operatorToken), ' +
        'secrets.storageSecret (or secrets.existingSecrets.storageSecret), ' +
        's3.accessKey (or secrets.existingSecrets.s3AccessKey), s3.secretKey (or secrets.existingSecrets.s3SecretKey); ' +
        'or set secrets.existingSecret to a Secret of yours with the keys operator-token, storage-secret, s3-access-key, s3-secret-key.',
    );
    // the operator's pools have tokens of their own: no agent token needed, none given to the server
    const operator = await render(['agent.mode=operator', 'secrets.operatorToken=op-1']);
    expect([...secretRefs(operator).keys()].sort()).toEqual([
      'Deployment/t-triad TRIAD_OPERATOR_TOKEN',
      'Deployment/t-triad-operator TRIAD_OPERATOR_TOKEN',
    ]);
    // one Secret of the user's holding the standard keys is enough
    const existing = await render(['secrets.existingSecret=mine']);
    expect(existing.filter((d) => d.kind === 'Secret')).toEqual([]);
    expect(new Set([...secretRefs(existing).values()].map((r) => r.name))).toEqual(new Set(['mine']));
  });

  test('when the values are given inline, then the chart keeps exactly them in its Secret and refers to it', async () => {
    const docs = await render([
      ...NODES,
      ...['database.url=postgres://u:p@db/triad', 'secrets.agentToken=agent-1', 'secrets.adminToken=admin-2'],
      ...['secrets.storageSecret=storage-3', 's3.accessKey=access-4', 's3.secretKey=secret-5'],
    ]);
    const secret = docs.find((d) => d.kind === 'Secret' && d.metadata.name === 't-triad');
    expect(secret?.stringData).toEqual({
      'agent-token': 'agent-1',
      'admin-token': 'admin-2',
      'storage-secret': 'storage-3',
      'database-url': 'postgres://u:p@db/triad',
      's3-access-key': 'access-4',
      's3-secret-key': 'secret-5',
    });
    const refs = secretRefs(docs);
    expect(refs.get('Deployment/t-triad TRIAD_AGENT_TOKEN')).toEqual({ name: 't-triad', key: 'agent-token' });
    expect(refs.get('Deployment/t-triad TRIAD_ADMIN_TOKEN')).toEqual({ name: 't-triad', key: 'admin-token' });
    expect(refs.get('StatefulSet/t-triad-storage DATABASE_URL')).toEqual({
      name: 't-triad',
      key: 'database-url',
    });
    // the migration hook runs before the release's Secret exists: it has a hook Secret of its own
    expect(refs.get('Job/t-triad-migrate DATABASE_URL')).toEqual({
      name: 't-triad-migrate',
      key: 'database-url',
    });
  });

  test('when every credential names a Secret of its own, then every reference follows it and the chart makes no Secret', async () => {
    const own = (cred: string, name: string, key?: string) => [
      `secrets.existingSecrets.${cred}.name=${name}`,
      ...(key === undefined ? [] : [`secrets.existingSecrets.${cred}.key=${key}`]),
    ];
    const creds = [
      ...own('agentToken', 'ci', 'token'),
      ...own('adminToken', 'bootstrap', 'admin'),
      ...own('storageSecret', 'storage'),
      ...own('databaseUrl', 'pg-app', 'uri'),
      ...own('s3AccessKey', 'minio', 'accesskey'),
      ...own('s3SecretKey', 'minio', 'secretkey'),
    ];
    const nodes = await render([...NODES, ...creds, 'agent.autoscaling.mode=keda']);
    expect(nodes.filter((d) => d.kind === 'Secret')).toEqual([]);
    const refs = secretRefs(nodes);
    const server = (env: string) => refs.get(`Deployment/t-triad ${env}`);
    expect(server('TRIAD_AGENT_TOKEN')).toEqual({ name: 'ci', key: 'token' });
    expect(server('TRIAD_ADMIN_TOKEN')).toEqual({ name: 'bootstrap', key: 'admin' });
    expect(server('TRIAD_STORAGE_SECRET')).toEqual({ name: 'storage', key: 'storage-secret' });
    expect(server('DATABASE_URL')).toEqual({ name: 'pg-app', key: 'uri' });
    expect(server('TRIAD_S3_ACCESS_KEY')).toEqual({ name: 'minio', key: 'accesskey' });
    expect(server('TRIAD_S3_SECRET_KEY')).toEqual({ name: 'minio', key: 'secretkey' });
    expect(refs.get('Deployment/t-triad-agent TRIAD_AGENT_TOKEN')).toEqual({ name: 'ci', key: 'token' });
    expect(refs.get('TriggerAuthentication/t-triad-agent token')).toEqual({ name: 'ci', key: 'token' });
    expect(refs.get('StatefulSet/t-triad-storage DATABASE_URL')).toEqual({ name: 'pg-app', key: 'uri' });
    expect(refs.get('StatefulSet/t-triad-storage TRIAD_STORAGE_SECRET')).toEqual({
      name: 'storage',
      key: 'storage-secret',
    });
    expect(refs.get('Job/t-triad-migrate DATABASE_URL')).toEqual({ name: 'pg-app', key: 'uri' });
    // nothing refers to a Secret of the chart's
    expect([...refs.values()].filter((r) => r.name.startsWith('t-triad'))).toEqual([]);
    // the given credential is required: the server's DATABASE_URL and admin token are not optional
    const serverEnv = nodes.find((d) => d.kind === 'Deployment' && d.metadata.name === 't-triad')?.spec
      .template.spec.containers[0].env as {
      name: string;
      valueFrom?: { secretKeyRef?: { optional?: boolean } };
    }[];
    const optional = (n: string) => serverEnv.find((e) => e.name === n)?.valueFrom?.secretKeyRef?.optional;
    expect([optional('DATABASE_URL'), optional('TRIAD_ADMIN_TOKEN')]).toEqual([false, false]);

    const ns = await newNamespace('chart-secrets');
    made.push(ns);
    const operator = await render(
      [
        ...creds,
        ...own('operatorToken', 'operator', 'token'),
        'agent.mode=operator',
        `agent.steps.namespace=${ns}`,
      ],
      ns,
    );
    const opRefs = secretRefs(operator);
    expect(opRefs.get('Deployment/t-triad-operator TRIAD_OPERATOR_TOKEN')).toEqual({
      name: 'operator',
      key: 'token',
    });
    expect(opRefs.get('Deployment/t-triad TRIAD_OPERATOR_TOKEN')).toEqual({ name: 'operator', key: 'token' });
    // a mixed configuration: the chart's Secret holds only the inline value
    const mixed = await render(['secrets.agentToken=inline-agent', ...own('adminToken', 'bootstrap')]);
    expect(mixed.find((d) => d.kind === 'Secret')?.stringData).toEqual({ 'agent-token': 'inline-agent' });

    // the API server accepts the objects (references to Secrets that do not exist yet included)
    const applied = await kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], {
      input: operator.map((d) => JSON.stringify(d)).join('\n---\n'),
    });
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
  });

  test('when the same values are rendered twice, then the output is identical and no template draws a random value', async () => {
    const args = ['template', 't', CHART, '-f', path.join(CHART, 'ci', 'all-on-values.yaml')];
    const [a, b] = [await helmOk(args), await helmOk(args)];
    expect(a).toBe(b);
    const nodes = ['template', 't', CHART, '-f', path.join(CHART, 'ci', 'storage-nodes-values.yaml')];
    expect(await helmOk(nodes)).toBe(await helmOk(nodes));
    const templates = fs.readdirSync(path.join(CHART, 'templates'));
    const random = templates.filter((f) =>
      /\b(randAlphaNum|randAlpha|randNumeric|randAscii|randBytes|uuidv4|genPrivateKey|lookup)\b/.test(
        fs.readFileSync(path.join(CHART, 'templates', f), 'utf8'),
      ),
    );
    expect(random).toEqual([]);
  });
});
