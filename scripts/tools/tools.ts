/**
 * The pinned third-party tools the test suite runs (a Kubernetes control plane, helm, kwok, MinIO)
 * and where their binaries live. They are built from their Go modules by `scripts/tools/build.ts`
 * into a cache directory that survives between runs:
 *
 *   $TRIAD_TOOLS_DIR                  (default ${XDG_CACHE_HOME:-$HOME/.cache}/triad/tools)
 *     kubernetes-v1.36.3/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
 *     etcd-v3.6.8/etcd
 *     helm-v3.22.0/helm
 *     kwok-v0.8.0/kwok
 *     minio-v0.0.0-…/minio
 *     keda-crds-v2.20.2/*.yaml, prometheus-operator-crds-v0.85.0/*.yaml   (copied from the Go modules)
 *     gateway-api-crds-v1.6.3/*.yaml                                       (likewise)
 *
 * Changing a version here makes the next run build the new one (the old directory stays until
 * removed by hand).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type ToolName =
  | 'kubernetes'
  | 'etcd'
  | 'helm'
  | 'kwok'
  | 'minio'
  | 'keda-crds'
  | 'prometheus-operator-crds'
  | 'gateway-api-crds';

export type Tool = {
  name: ToolName;
  version: string;
  /** Binaries the tool directory holds once built. */
  binaries: readonly string[];
  /** For CRD sets: the Go module they come from and the files copied from it (no binaries). */
  module?: { path: string; files: readonly string[] };
};

export const KUBERNETES_VERSION = 'v1.36.3';
/** The etcd server version kubernetes' own go.mod names for this release. */
export const ETCD_VERSION = 'v3.6.8';
export const HELM_VERSION = 'v3.22.0';
export const KWOK_VERSION = 'v0.8.0';
/** RELEASE.2025-09-07T16-13-09Z: the repository's tags are not semver, so the pseudo-version is pinned. */
export const MINIO_VERSION = 'v0.0.0-20250907161309-07c3a429bfed';
/** CRDs the chart's optional objects need (ScaledObject, TriggerAuthentication, ServiceMonitor, PodMonitor). */
export const KEDA_VERSION = 'v2.20.2';
export const PROMETHEUS_OPERATOR_VERSION = 'v0.85.0';
/** The Gateway API's standard channel (the chart's HTTPRoute); v1.7.0 needs Go 1.27. */
export const GATEWAY_API_VERSION = 'v1.6.3';

export const TOOLS: Record<ToolName, Tool> = {
  kubernetes: {
    name: 'kubernetes',
    version: KUBERNETES_VERSION,
    binaries: ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubectl'],
  },
  etcd: { name: 'etcd', version: ETCD_VERSION, binaries: ['etcd'] },
  helm: { name: 'helm', version: HELM_VERSION, binaries: ['helm'] },
  kwok: { name: 'kwok', version: KWOK_VERSION, binaries: ['kwok'] },
  minio: { name: 'minio', version: MINIO_VERSION, binaries: ['minio'] },
  'keda-crds': {
    name: 'keda-crds',
    version: KEDA_VERSION,
    binaries: [],
    module: {
      path: 'github.com/kedacore/keda/v2',
      files: [
        'config/crd/bases/keda.sh_scaledobjects.yaml',
        'config/crd/bases/keda.sh_triggerauthentications.yaml',
      ],
    },
  },
  'prometheus-operator-crds': {
    name: 'prometheus-operator-crds',
    version: PROMETHEUS_OPERATOR_VERSION,
    binaries: [],
    module: {
      path: 'github.com/prometheus-operator/prometheus-operator',
      files: [
        'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml',
        'example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml',
      ],
    },
  },
  'gateway-api-crds': {
    name: 'gateway-api-crds',
    version: GATEWAY_API_VERSION,
    binaries: [],
    module: {
      path: 'sigs.k8s.io/gateway-api',
      files: [
        'config/crd/standard/gateway.networking.k8s.io_gateways.yaml',
        'config/crd/standard/gateway.networking.k8s.io_httproutes.yaml',
      ],
    },
  },
};

export const TOOL_NAMES = Object.keys(TOOLS) as ToolName[];

/** The cache root: TRIAD_TOOLS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/triad/tools. */
export function toolsDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TRIAD_TOOLS_DIR !== undefined && env.TRIAD_TOOLS_DIR !== '')
    return path.resolve(env.TRIAD_TOOLS_DIR);
  const cache =
    env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== ''
      ? env.XDG_CACHE_HOME
      : path.join(env.HOME ?? os.homedir(), '.cache');
  return path.join(path.resolve(cache), 'triad', 'tools');
}

/** Directory of one tool at its pinned version. */
export function toolDir(name: ToolName, env: NodeJS.ProcessEnv = process.env): string {
  const t = TOOLS[name];
  return path.join(toolsDir(env), `${t.name}-${t.version}`);
}

/** Absolute path of a binary of a tool (built or not). */
export function toolPath(
  name: ToolName,
  binary: string = name,
  env: NodeJS.ProcessEnv = process.env,
): string {
  return path.join(toolDir(name, env), binary);
}

/** Files of a CRD set as they are stored in its tool directory (flat). */
export function toolFiles(name: ToolName, env: NodeJS.ProcessEnv = process.env): string[] {
  return (TOOLS[name].module?.files ?? []).map((f) => path.join(toolDir(name, env), path.basename(f)));
}

/** Whether every binary of the tool is present and executable (and every file of a CRD set present). */
export function isBuilt(name: ToolName, env: NodeJS.ProcessEnv = process.env): boolean {
  const ok = (file: string, mode: number) => {
    try {
      fs.accessSync(file, mode);
      return true;
    } catch {
      return false;
    }
  };
  return (
    TOOLS[name].binaries.every((b) => ok(toolPath(name, b, env), fs.constants.X_OK)) &&
    toolFiles(name, env).every((f) => ok(f, fs.constants.R_OK))
  );
}

/** The tools not built yet. */
export function missingTools(names: readonly ToolName[] = TOOL_NAMES, env = process.env): ToolName[] {
  return names.filter((n) => !isBuilt(n, env));
}

/** Binary paths of the control plane, for the harness. Throws naming the build command when missing. */
export function requireTools(names: readonly ToolName[], env = process.env): void {
  const missing = missingTools(names, env);
  if (missing.length > 0)
    throw new Error(
      `test tools missing in ${toolsDir(env)}: ${missing.map((n) => `${n}-${TOOLS[n].version}`).join(', ')}; ` +
        'build them with `npm run tools` (node scripts/tools/build.ts)',
    );
}
