/** Helpers of the chart and manifest tests: third-party CRDs, listing everything in a namespace. */
import { toolFiles } from '../../../scripts/tools/tools.ts';
import { kubectlOk, waitFor } from './kube.ts';

let crds: Promise<void> | undefined;

/**
 * KEDA's ScaledObject/TriggerAuthentication, the Prometheus operator's ServiceMonitor/PodMonitor and
 * the Gateway API's Gateway/HTTPRoute CRDs, from their Go modules (copied into the tools cache by
 * the build). Server-side apply, so test files may call it concurrently.
 */
export function installCrds(): Promise<void> {
  crds ??= (async () => {
    const files = [
      ...toolFiles('keda-crds'),
      ...toolFiles('prometheus-operator-crds'),
      ...toolFiles('gateway-api-crds'),
    ];
    await kubectlOk(['apply', '--server-side', '--force-conflicts', ...files.flatMap((f) => ['-f', f])]);
    await kubectlOk([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/scaledobjects.keda.sh',
      'crd/triggerauthentications.keda.sh',
      'crd/servicemonitors.monitoring.coreos.com',
      'crd/podmonitors.monitoring.coreos.com',
      'crd/gateways.gateway.networking.k8s.io',
      'crd/httproutes.gateway.networking.k8s.io',
    ]);
  })();
  return crds;
}

/** Resource types that can be listed in a namespace (cached). */
let kinds: Promise<string> | undefined;
function namespacedKinds(): Promise<string> {
  kinds ??= kubectlOk(['api-resources', '--verbs=list', '--namespaced', '-o', 'name']).then((out) =>
    out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && l !== 'events' && l !== 'events.events.k8s.io')
      .join(','),
  );
  return kinds;
}

/** What every namespace has from the start (its default service account and the cluster CA). */
const BUILT_IN = new Set(['serviceaccount/default', 'configmap/kube-root-ca.crt']);

/** Every object in a namespace (`kind.group/name`) but events and what every namespace has. */
export async function everythingIn(namespace: string): Promise<string[]> {
  const out = await kubectlOk([
    'get',
    await namespacedKinds(),
    '-n',
    namespace,
    '-o',
    'name',
    '--ignore-not-found',
  ]);
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !BUILT_IN.has(l))
    .sort();
}

/** Waits until a namespace holds nothing but `keep`; returns what is left. */
export async function waitUntilOnly(
  namespace: string,
  keep: string[] = [],
  timeoutMs = 90_000,
): Promise<string[]> {
  let left: string[] = [];
  await waitFor(
    `only ${keep.join(', ') || 'nothing'} left in ${namespace}`,
    async () => {
      left = await everythingIn(namespace);
      return JSON.stringify(left) === JSON.stringify([...keep].sort());
    },
    timeoutMs,
    500,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}; left: ${left.join(', ')}`);
  });
  return left;
}
