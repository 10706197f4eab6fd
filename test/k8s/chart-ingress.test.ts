/**
 * What the chart puts in front of the server and around its end: the ingress-nginx annotations a
 * push needs (and values that override them), the Gateway API HTTPRoute (applied to the real API
 * server with the Gateway API's own CRDs and their validations), the metrics port and who may
 * reach it, the trusted proxy hop and the NetworkPolicy that goes with it, and the preStop delay
 * and termination grace of the server and the storage nodes.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { CHART, deleteNamespace, helm, helmOk, kubectl, kubectlOk, newNamespace } from './harness/kube.ts';
import { installCrds } from './harness/objects.ts';

let ns: string;
beforeAll(async () => {
  ns = await newNamespace('chart-ingress');
  await installCrds();
});
afterAll(async () => {
  if (ns !== undefined) await deleteNamespace(ns);
});

type Obj = { kind: string; metadata: { name: string; annotations?: Record<string, string> }; spec: any };

async function render(set: string[], ...only: string[]): Promise<Obj[]> {
  const args = ['template', 't', CHART, '-n', ns, ...set.flatMap((s) => ['--set', s])];
  const out = await helmOk([...args, ...only.flatMap((o) => ['--show-only', `templates/${o}.yaml`])]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Obj | null)
    .filter((d): d is Obj => d !== null);
}
const one = async (set: string[], template: string, kind: string): Promise<Obj> => {
  const found = (await render(set, template)).filter((o) => o.kind === kind);
  expect(found).toHaveLength(1);
  return found[0]!;
};
const server = (set: string[]) => one(set, 'server-deployment', 'Deployment');
const container = async (set: string[]) => (await server(set)).spec.template.spec.containers[0];
const env = async (set: string[]) =>
  Object.fromEntries(
    ((await container(set)).env as { name: string; value?: string }[]).map((e) => [e.name, e.value]),
  );
const NGINX = 'nginx.ingress.kubernetes.io';
const TRANSPORT_1200 = ['backends.env[0].name=TRIAD_TRANSPORT_TIMEOUT_SECONDS', 'backends.env[0].value=1200'];

describe('the Ingress', () => {
  test('when the class is nginx, then the body size is unlimited, the timeouts follow the transport timeout and nothing is buffered', async () => {
    const ing = await one(['ingress.enabled=true', 'ingress.className=nginx'], 'ingress', 'Ingress');
    expect(ing.metadata.annotations).toEqual({
      [`${NGINX}/proxy-body-size`]: '0',
      [`${NGINX}/proxy-read-timeout`]: '660',
      [`${NGINX}/proxy-send-timeout`]: '660',
      [`${NGINX}/proxy-request-buffering`]: 'off',
      [`${NGINX}/proxy-buffering`]: 'off',
    });
    // only the main port is routed
    expect(ing.spec.rules[0].http.paths).toEqual([
      { path: '/', pathType: 'Prefix', backend: { service: { name: 't-triad', port: { name: 'http' } } } },
    ]);
    const longer = await one(
      ['ingress.enabled=true', 'ingress.className=nginx', ...TRANSPORT_1200],
      'ingress',
      'Ingress',
    );
    expect(longer.metadata.annotations).toMatchObject({
      [`${NGINX}/proxy-read-timeout`]: '1260',
      [`${NGINX}/proxy-send-timeout`]: '1260',
    });
  });

  test("when ingress.annotations name one of them, then the user's value wins and the others stay", async () => {
    const ing = await one(
      [
        'ingress.enabled=true',
        'ingress.className=nginx',
        `ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-body-size=512m`,
        'ingress.annotations.example\\.com/team=scm',
      ],
      'ingress',
      'Ingress',
    );
    expect(ing.metadata.annotations).toMatchObject({
      [`${NGINX}/proxy-body-size`]: '512m',
      [`${NGINX}/proxy-read-timeout`]: '660',
      [`${NGINX}/proxy-request-buffering`]: 'off',
      'example.com/team': 'scm',
    });
  });

  test('when the class is another or ingress.nginx says so, then the nginx annotations follow ingress.nginx', async () => {
    const traefik = await one(['ingress.enabled=true', 'ingress.className=traefik'], 'ingress', 'Ingress');
    expect(traefik.metadata.annotations).toBeUndefined();
    const forced = await one(
      ['ingress.enabled=true', 'ingress.className=public', 'ingress.nginx=true'],
      'ingress',
      'Ingress',
    );
    expect(forced.metadata.annotations?.[`${NGINX}/proxy-body-size`]).toBe('0');
    const off = await one(
      ['ingress.enabled=true', 'ingress.className=nginx', 'ingress.nginx=false', 'ingress.annotations.a=b'],
      'ingress',
      'Ingress',
    );
    expect(off.metadata.annotations).toEqual({ a: 'b' });
  });

  test('when the rendered Ingress is applied, then the API server accepts it', async () => {
    const out = await helmOk([
      ...['template', 't', CHART, '-n', ns, '--show-only', 'templates/ingress.yaml'],
      ...['--set', 'ingress.enabled=true', '--set', 'ingress.className=nginx'],
    ]);
    await kubectlOk(['apply', '--validate=strict', '-f', '-'], { input: out });
    const got = JSON.parse(await kubectlOk(['get', 'ingress', 't-triad', '-n', ns, '-o', 'json']));
    expect(got.metadata.annotations[`${NGINX}/proxy-read-timeout`]).toBe('660');
  });
});

describe('the HTTPRoute', () => {
  const ROUTE = [
    'httpRoute.enabled=true',
    'httpRoute.parentRefs[0].name=public',
    'httpRoute.parentRefs[0].namespace=gateway-system',
    'httpRoute.parentRefs[0].sectionName=https',
    'httpRoute.hostnames[0]=triad.example.com',
  ];

  test('when enabled, then it routes the main port of the Service with the transport timeout, and the API server (with the Gateway API CRDs) accepts it', async () => {
    const route = await one(ROUTE, 'httproute', 'HTTPRoute');
    expect(route.spec).toEqual({
      parentRefs: [{ name: 'public', namespace: 'gateway-system', sectionName: 'https' }],
      hostnames: ['triad.example.com'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          backendRefs: [{ name: 't-triad', port: 3000 }],
          timeouts: { request: '660s', backendRequest: '660s' },
        },
      ],
    });
    const out = await helmOk([
      ...['template', 't', CHART, '-n', ns, '--show-only', 'templates/httproute.yaml'],
      ...ROUTE.flatMap((s) => ['--set', s]),
      ...TRANSPORT_1200.flatMap((s) => ['--set', s]),
    ]);
    await kubectlOk(['apply', '--validate=strict', '-f', '-'], { input: out });
    const got = JSON.parse(await kubectlOk(['get', 'httproute', 't-triad', '-n', ns, '-o', 'json']));
    expect(got.spec.rules[0].timeouts).toEqual({ request: '1260s', backendRequest: '1260s' });
    expect(got.spec.rules[0].backendRefs[0]).toMatchObject({ name: 't-triad', port: 3000 });
  });

  test('when timeouts are given, then they are used, and the CRD refuses a backend timeout above the request timeout', async () => {
    const set = [...ROUTE, 'httpRoute.timeouts.request=30m', 'httpRoute.timeouts.backendRequest=20m'];
    expect((await one(set, 'httproute', 'HTTPRoute')).spec.rules[0].timeouts).toEqual({
      request: '30m',
      backendRequest: '20m',
    });
    const bad = await helmOk([
      ...['template', 'bad', CHART, '-n', ns, '--show-only', 'templates/httproute.yaml'],
      ...[...ROUTE, 'httpRoute.timeouts.request=1m', 'httpRoute.timeouts.backendRequest=2m'].flatMap((s) => [
        '--set',
        s,
      ]),
    ]);
    const r = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: bad });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/backendRequest timeout cannot be longer than request timeout/);
    // a request timeout alone below the default: the backend timeout follows it, and the CRD accepts it
    const short = await helmOk([
      ...['template', 'short', CHART, '-n', ns, '--show-only', 'templates/httproute.yaml'],
      ...[...ROUTE, 'httpRoute.timeouts.request=30s'].flatMap((s) => ['--set', s]),
    ]);
    expect(short).toMatch(/backendRequest: "30s"/);
    const ok = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: short });
    expect([ok.code, ok.stderr]).toEqual([0, '']);
  });

  test('when enabled without a parent, or with a malformed duration, then rendering fails saying which value', async () => {
    const none = await helm(['template', 't', CHART, '--set', 'httpRoute.enabled=true']);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/httpRoute.enabled needs httpRoute.parentRefs/);
    const malformed = await helm(['template', 't', CHART, '--set', 'httpRoute.timeouts.request=10 minutes']);
    expect(malformed.code).not.toBe(0);
    expect(malformed.stderr).toMatch(/schema[\s\S]*timeouts.request/);
  });
});

describe('the metrics port', () => {
  test('by default, then /metrics is on a port of its own: container port, Service port `metrics`, the ServiceMonitor scrapes it', async () => {
    const c = await container([]);
    expect(c.ports).toEqual([
      { name: 'http', containerPort: 3000 },
      { name: 'metrics', containerPort: 9090 },
    ]);
    expect((await env([])).TRIAD_METRICS_PORT).toBe('9090');
    const svc = await one([], 'server-service', 'Service');
    expect(svc.spec.ports).toEqual([
      { name: 'http', port: 3000, targetPort: 'http' },
      { name: 'metrics', port: 9090, targetPort: 'metrics' },
    ]);
    const sm = await one(['metrics.serviceMonitor.enabled=true'], 'monitoring', 'ServiceMonitor');
    expect(sm.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '30s' }]);
  });

  test('when server.metricsPort is empty, then /metrics stays on the main port (no variable, no port) and the ServiceMonitor scrapes that', async () => {
    const set = ['server.metricsPort=null'];
    expect((await container(set)).ports).toEqual([{ name: 'http', containerPort: 3000 }]);
    expect((await env(set)).TRIAD_METRICS_PORT).toBeUndefined();
    expect((await one(set, 'server-service', 'Service')).spec.ports).toHaveLength(1);
    const sm = await one([...set, 'metrics.serviceMonitor.enabled=true'], 'monitoring', 'ServiceMonitor');
    expect(sm.spec.endpoints[0].port).toBe('http');
  });
});

describe('the trusted proxy and the NetworkPolicy', () => {
  const NP = [
    'networkPolicy.enabled=true',
    'networkPolicy.serverFrom[0].podSelector.matchLabels.app=ingress',
  ];
  const serverPolicy = async (set: string[]) =>
    (await render(set, 'networkpolicy')).find((o) => o.metadata.name === 't-triad')!;
  const peersOfHttp = async (set: string[]) =>
    (await serverPolicy(set)).spec.ingress.find((r: any) => r.ports[0].port === 'http').from;

  test('when the Ingress or the HTTPRoute is on, then the server trusts one proxy hop, unless server.trustProxy says otherwise', async () => {
    expect((await env([])).TRIAD_TRUST_PROXY).toBeUndefined();
    expect((await env(['ingress.enabled=true'])).TRIAD_TRUST_PROXY).toBe('1');
    expect((await env(['httpRoute.enabled=true', 'httpRoute.parentRefs[0].name=gw'])).TRIAD_TRUST_PROXY).toBe(
      '1',
    );
    expect((await env(['ingress.enabled=true', 'server.trustProxy=10.8.0.0/16'])).TRIAD_TRUST_PROXY).toBe(
      '10.8.0.0/16',
    );
    expect((await env(['ingress.enabled=true', 'server.trustProxy=false'])).TRIAD_TRUST_PROXY).toBe('false');
    expect((await env(['ingress.enabled=true', 'server.trustProxy=2'])).TRIAD_TRUST_PROXY).toBe('2');
    // a variable of server.extraEnv is the only one of that name
    const c = await container([
      'ingress.enabled=true',
      'server.extraEnv[0].name=TRIAD_TRUST_PROXY',
      'server.extraEnv[0].value=loopback',
    ]);
    expect(c.env.filter((e: { name: string }) => e.name === 'TRIAD_TRUST_PROXY')).toEqual([
      { name: 'TRIAD_TRUST_PROXY', value: 'loopback' },
    ]);
    const refused = await helm(['template', 't', CHART, '--set', 'server.trustProxy=everyone']);
    expect(refused.stderr).toMatch(/schema[\s\S]*trustProxy/);
  });

  test('when the server trusts a hop and nothing limits who reaches it, then the install notes say so', async () => {
    const notes = async (set: string[]) =>
      helmOk(['install', 'notes', CHART, '-n', ns, '--dry-run=client', ...set.flatMap((x) => ['--set', x])]);
    expect(await notes(['ingress.enabled=true'])).toMatch(
      /The server trusts 1 proxy hop\(s\)[\s\S]*networkPolicy.serverFrom/,
    );
    expect(await notes(['ingress.enabled=true', 'baseUrl=https://triad.example.org', ...NP])).not.toMatch(
      /The server trusts/,
    );
    expect(await notes([])).not.toMatch(/The server trusts/);
  });

  test('when the server trusts a hop, then its port admits serverFrom and the agents but no step pod (which could forge X-Forwarded-For)', async () => {
    // without a baseUrl the steps would clone from the Service, which the policy now closes to them
    const refused = await helm([
      'template',
      't',
      CHART,
      ...[...NP, 'ingress.enabled=true'].flatMap((x) => ['--set', x]),
    ]);
    expect(refused.stderr).toMatch(/keeps step pods away from the server[\s\S]*set baseUrl/);
    const peers = await peersOfHttp([...NP, 'ingress.enabled=true', 'baseUrl=https://triad.example.org']);
    expect(peers).toEqual([
      { podSelector: { matchLabels: { app: 'ingress' } } },
      {
        podSelector: {
          matchExpressions: [
            { key: 'app.kubernetes.io/name', operator: 'In', values: ['triad'] },
            { key: 'app.kubernetes.io/instance', operator: 'In', values: ['t'] },
            { key: 'app.kubernetes.io/component', operator: 'In', values: ['agent', 'operator'] },
          ],
        },
      },
    ]);
    // trusting the controller's addresses only: step pods may clone directly again
    const cidr = await peersOfHttp([...NP, 'ingress.enabled=true', 'server.trustProxy=10.8.0.0/16']);
    expect(cidr).toHaveLength(3);
    expect(cidr[2]).toEqual({
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': `${ns}-steps` } },
      podSelector: { matchLabels: { 'app.kubernetes.io/managed-by': 'triad-agent' } },
    });
    expect(await peersOfHttp(NP)).toHaveLength(3);
  });

  test('when the metrics port is on, then the policy opens it to metricsFrom only', async () => {
    const set = [...NP, 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring'];
    const rules = (await serverPolicy(set)).spec.ingress;
    expect(rules.map((r: any) => r.ports)).toEqual([
      [{ port: 'http', protocol: 'TCP' }],
      [{ port: 'metrics', protocol: 'TCP' }],
    ]);
    expect(rules[1].from).toEqual([{ namespaceSelector: { matchLabels: { team: 'monitoring' } } }]);
    const plain = (await serverPolicy([...NP, 'server.metricsPort=null'])).spec.ingress;
    expect(plain).toHaveLength(1);
  });
});

describe('termination', () => {
  test('by default, then a preStop delay, and a grace long enough for the delay, a transfer of the transport timeout and the shutdown reserve', async () => {
    const d = await server([]);
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(625);
    expect(d.spec.template.spec.containers[0].lifecycle).toEqual({ preStop: { sleep: { seconds: 10 } } });
    expect((await env([])).TRIAD_SHUTDOWN_TIMEOUT_SECONDS).toBe('610');
    const longer = await server(TRANSPORT_1200);
    expect(longer.spec.template.spec.terminationGracePeriodSeconds).toBe(1225);
    expect((await env(TRANSPORT_1200)).TRIAD_SHUTDOWN_TIMEOUT_SECONDS).toBe('1210');
  });

  test('when the values are set, then they win; without a delay there is no preStop; before Kubernetes 1.30 the delay is a sleep command', async () => {
    const set = ['server.terminationGracePeriodSeconds=40', 'server.preStopSeconds=5'];
    expect((await server(set)).spec.template.spec.terminationGracePeriodSeconds).toBe(40);
    expect((await env(set)).TRIAD_SHUTDOWN_TIMEOUT_SECONDS).toBe('30');
    const none = await server(['server.preStopSeconds=0']);
    expect(none.spec.template.spec.containers[0].lifecycle).toBeUndefined();
    expect(none.spec.template.spec.terminationGracePeriodSeconds).toBe(615);
    const old = await helmOk([
      ...['template', 't', CHART, '--kube-version', '1.28.0'],
      ...['--show-only', 'templates/server-deployment.yaml'],
    ]);
    const c = (parseAllDocuments(old)[0]!.toJS() as Obj).spec.template.spec.containers[0];
    expect(c.lifecycle).toEqual({ preStop: { exec: { command: ['sleep', '10'] } } });
  });

  test('when storage nodes serve the transfers, then their grace follows the transport timeout too', async () => {
    const nodes = ['storage.mode=nodes', 'database.url=postgres://u:p@db/triad', 's3.endpoint=minio:9000'];
    const sts = await one([...nodes, ...TRANSPORT_1200], 'storage-nodes', 'StatefulSet');
    expect(sts.spec.template.spec.terminationGracePeriodSeconds).toBe(1215);
    const e = sts.spec.template.spec.containers[0].env.find(
      (x: { name: string }) => x.name === 'TRIAD_SHUTDOWN_TIMEOUT_SECONDS',
    );
    expect(e.value).toBe('1210');
    const set = await one(
      [...nodes, 'storage.nodes.terminationGracePeriodSeconds=60'],
      'storage-nodes',
      'StatefulSet',
    );
    expect(set.spec.template.spec.terminationGracePeriodSeconds).toBe(60);
  });

  test('when the whole chart with the Ingress, the HTTPRoute, the metrics port and the policies is applied, then the API server accepts every object', async () => {
    const out = await helmOk([
      ...['template', 'w', CHART, '-n', ns],
      ...['--set', 'ingress.enabled=true', '--set', 'ingress.className=nginx'],
      ...['--set', 'httpRoute.enabled=true', '--set', 'httpRoute.parentRefs[0].name=public'],
      ...['--set', 'metrics.serviceMonitor.enabled=true', '--set', 'networkPolicy.enabled=true'],
      ...['--set', 'agent.steps.createNamespace=false', '--set', `agent.steps.namespace=${ns}`],
    ]);
    const r = await kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], { input: out });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/deployment.apps\/w-triad created \(server dry run\)/);
    expect(r.stdout).toMatch(/httproute.gateway.networking.k8s.io\/w-triad created \(server dry run\)/);
  });
});
