#!/usr/bin/env bash
# Render-checks the Helm chart with `helm template` (no cluster needed) and asserts the objects
# that matter. Not part of `npm test`. Needs helm 3 (`go install helm.sh/helm/v3/cmd/helm@v3.19.0`
# works; HELM=/path/to/helm to pick one) and the project's node_modules (for the yaml package).
set -euo pipefail
cd "$(dirname "$0")/../.."
HELM=${HELM:-$(command -v helm || echo "$(go env GOPATH 2>/dev/null)/bin/helm")}
NODE=${NODE:-node_modules/.bin/node}
[ -x "$NODE" ] || NODE=node
KV=(--kube-version 1.31.0)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== helm lint"
"$HELM" lint charts/triad --strict "${KV[@]}" --set secrets.agentToken=agt >/dev/null

render() { # name, args...
  local name=$1
  shift
  "$HELM" template t charts/triad -n triad "${KV[@]}" "$@" >"$out/$name.yaml"
}

# the chart generates no credentials: the agent token is given
render default --set secrets.agentToken=agt
render keda --set secrets.agentToken=agt --set agent.autoscaling.mode=keda --set agent.capacity=3
render full \
  --set server.replicas=3 --set database.url=postgres://u:p@db/triad \
  --set s3.endpoint=minio:9000 --set s3.accessKey=a --set s3.secretKey=b \
  --set secrets.adminToken=adm --set secrets.agentToken=agt \
  --set ingress.enabled=true --set ingress.host=triad.example.org \
  --set agent.autoscaling.mode=none --set agent.replicas=2 \
  --set agent.steps.namespace=ci-steps --set agent.steps.storageClass=fast \
  --set agent.steps.memoryLimit=2Gi --set agent.steps.cpuRequest=500m \
  --set agent.steps.nodeSelector.pool=ci --set 'agent.steps.imagePullSecrets={reg1,reg2}' \
  --set agent.steps.runAsUser=0 --set image.tag=1.2.3
render existing --set secrets.existingSecret=mine

echo "== no credential given: refused, naming the value"
refusal=$("$HELM" template t charts/triad "${KV[@]}" 2>&1 || true)
if [[ "$refusal" != *"credentials missing: set secrets.agentToken"* ]]; then
  echo "FAIL: rendering without credentials did not name secrets.agentToken" >&2
  exit 1
fi

echo "== a second replica without an external database is refused"
if "$HELM" template t charts/triad "${KV[@]}" --set server.replicas=2 >/dev/null 2>&1; then
  echo "FAIL: server.replicas=2 without database.url rendered" >&2
  exit 1
fi
if "$HELM" template t charts/triad "${KV[@]}" --set agent.autoscaling.mode=bogus >/dev/null 2>&1; then
  echo "FAIL: a bad autoscaling mode rendered" >&2
  exit 1
fi

echo "== assertions"
OUT="$out" "$NODE" --input-type=module -e '
import fs from "node:fs";
import { parseAllDocuments } from "yaml";
const load = (n) => parseAllDocuments(fs.readFileSync(`${process.env.OUT}/${n}.yaml`, "utf8"))
  .map((d) => d.toJSON()).filter((d) => d !== null);
let failed = 0;
const check = (what, ok) => { console.log(`${ok ? "ok  " : "FAIL"} ${what}`); if (!ok) failed++; };
const find = (docs, kind, name) => docs.find((d) => d.kind === kind && (name === undefined || d.metadata.name === name));
const env = (dep) => Object.fromEntries(dep.spec.template.spec.containers[0].env.map((e) => [e.name, e.value ?? e.valueFrom]));

const d = load("default");
const server = find(d, "Deployment", "t-triad"), agent = find(d, "Deployment", "t-triad-agent");
const se = env(server), ae = env(agent);
check("default: server and agent Deployments, Service, Secret, PVC, RBAC, HPA",
  ["Service", "Secret", "PersistentVolumeClaim", "ServiceAccount", "Role", "RoleBinding", "HorizontalPodAutoscaler"]
    .every((k) => find(d, k)) && server && agent);
check("server probes /readyz and /healthz", server.spec.template.spec.containers[0].readinessProbe.httpGet.path === "/readyz"
  && server.spec.template.spec.containers[0].livenessProbe.httpGet.path === "/healthz");
check("server: embedded agent off, base URL in the cluster, agent token from the secret",
  se.TRIAD_EMBEDDED_AGENT === "off" && se.TRIAD_BASE_URL === "http://t-triad.triad.svc.cluster.local:3000"
  && se.TRIAD_AGENT_TOKEN.secretKeyRef.key === "agent-token" && se.DATABASE_URL === undefined);
check("default: Recreate strategy and RWO volume with one replica and the embedded database",
  server.spec.strategy?.type === "Recreate" && find(d, "PersistentVolumeClaim").spec.accessModes[0] === "ReadWriteOnce");
check("agent: kubernetes executor, server URL, POD_NAME from the downward API, capacity, metrics port",
  ae.TRIAD_AGENT_EXECUTOR === "kubernetes" && ae.TRIAD_AGENT_SERVER === "http://t-triad.triad.svc:3000"
  && ae.POD_NAME.fieldRef.fieldPath === "metadata.name" && ae.TRIAD_AGENT_CAPACITY === "4"
  && ae.TRIAD_AGENT_METRICS_PORT === "9090" && ae.TRIAD_AGENT_CLONE_IMAGE === "triad-clone:0.1.0"
  && ae.TRIAD_AGENT_TOKEN.secretKeyRef.key === "agent-token");
check("agent: /healthz probe on the metrics port", agent.spec.template.spec.containers[0].livenessProbe.httpGet.port === "metrics");
check("agent: no replicas field under the HPA", agent.spec.replicas === undefined);
const role = find(d, "Role");
check("role: pods, pods/log, events, persistentvolumeclaims", JSON.stringify(role.rules.map((r) => r.resources).flat())
  === JSON.stringify(["pods", "pods/log", "events", "persistentvolumeclaims"]));
check("secret: the given agent token", find(d, "Secret").stringData["agent-token"] === "agt");

const k = load("keda");
const so = find(k, "ScaledObject");
check("keda: ScaledObject on /api/v1/ci/queue pending with bearer auth, no HPA",
  so && !find(k, "HorizontalPodAutoscaler") && so.spec.triggers[0].type === "metrics-api"
  && so.spec.triggers[0].metadata.url === "http://t-triad.triad.svc:3000/api/v1/ci/queue"
  && so.spec.triggers[0].metadata.valueLocation === "pending" && so.spec.triggers[0].metadata.targetValue === "3"
  && find(k, "TriggerAuthentication").spec.secretTargetRef[0].parameter === "token");

const f = load("full");
const fs2 = find(f, "Deployment", "t-triad"), fa = find(f, "Deployment", "t-triad-agent");
const fse = env(fs2), fae = env(fa);
check("full: 3 replicas, RWX volume, rolling update", fs2.spec.replicas === 3 && fs2.spec.strategy === undefined
  && find(f, "PersistentVolumeClaim").spec.accessModes[0] === "ReadWriteMany");
check("full: DATABASE_URL, admin token and S3 from the secret", fse.DATABASE_URL.secretKeyRef.key === "database-url"
  && fse.TRIAD_ADMIN_TOKEN.secretKeyRef.key === "admin-token" && fse.TRIAD_S3_ENDPOINT === "minio:9000"
  && fse.TRIAD_S3_SECRET_KEY.secretKeyRef.key === "s3-secret-key");
check("full: ingress", find(f, "Ingress").spec.rules[0].host === "triad.example.org");
check("full: fixed agent replicas, no HPA", fa.spec.replicas === 2 && !find(f, "HorizontalPodAutoscaler"));
check("full: step options reach the agent", fae.TRIAD_AGENT_NAMESPACE === "ci-steps" && fae.TRIAD_AGENT_STORAGE_CLASS === "fast"
  && fae.TRIAD_AGENT_MEMORY_LIMIT === "2Gi" && fae.TRIAD_AGENT_CPU_REQUEST === "500m"
  && fae.TRIAD_AGENT_NODE_SELECTOR === "{\"pool\":\"ci\"}" && fae.TRIAD_AGENT_IMAGE_PULL_SECRETS === "reg1,reg2"
  && fae.TRIAD_AGENT_RUN_AS_USER === "0" && fae.TRIAD_AGENT_CLONE_IMAGE === "triad-clone:1.2.3");
const roles = f.filter((x) => x.kind === "Role");
check("full: the only agent Role is in the step namespace", roles.length === 1
  && roles[0].metadata.namespace === "ci-steps");

const e = load("existing");
check("existing secret: no Secret made, env refers to it", !find(e, "Secret")
  && env(find(e, "Deployment", "t-triad")).TRIAD_AGENT_TOKEN.secretKeyRef.name === "mine");
if (failed > 0) { console.error(`${failed} check(s) failed`); process.exit(1); }
console.log("all checks passed");
'
