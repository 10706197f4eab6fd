#!/usr/bin/env bash
# End-to-end test on a throwaway kind cluster: builds the image, installs the Helm chart (server,
# PostgreSQL, one agent with the kubernetes executor), pushes a git repository with a two-step
# .pipeline.yml and checks what the agent's step pods did. Not part of `npm test`.
#
# Needs: docker (running), kind, kubectl, helm 3, git, curl, jq. See test/e2e/README.md.
# Environment: CLUSTER (triad-e2e), KEEP_CLUSTER=1 (leave the cluster for inspection),
# REUSE_CLUSTER=1 (use an existing cluster of that name), LOCAL_PORT (38080), TIMEOUT (300 s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=${CLUSTER:-triad-e2e}
NS=triad
IMAGE=triad:e2e
STEP_IMAGE=alpine:3.20
LOCAL_PORT=${LOCAL_PORT:-38080}
TIMEOUT=${TIMEOUT:-300}
ADMIN_TOKEN=e2e-admin-$(openssl rand -hex 12 2>/dev/null || echo $RANDOM$RANDOM)
AGENT_TOKEN=e2e-agent-$(openssl rand -hex 12 2>/dev/null || echo $RANDOM$RANDOM)
API=http://127.0.0.1:$LOCAL_PORT
WORK=$(mktemp -d)
PF_PID=""
CREATED_CLUSTER=0

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
pass() { printf '\033[32mPASS\033[0m %s\n' "$*"; }
fail() {
  printf '\033[31mFAIL\033[0m %s\n' "$*" >&2
  diagnostics
  exit 1
}

diagnostics() {
  set +e
  echo "---- diagnostics ----" >&2
  kubectl -n "$NS" get pods,pvc -o wide >&2
  echo "---- server log (tail) ----" >&2
  kubectl -n "$NS" logs deploy/triad --tail=60 >&2
  echo "---- agent log (tail) ----" >&2
  kubectl -n "$NS" logs deploy/triad-agent --tail=60 >&2
  kubectl -n "$NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -30 >&2
  set -e
}

cleanup() {
  set +e
  [ -n "$PF_PID" ] && kill "$PF_PID" 2>/dev/null
  rm -rf "$WORK"
  if [ "$CREATED_CLUSTER" = 1 ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    step "deleting kind cluster $CLUSTER"
    kind delete cluster --name "$CLUSTER"
  elif [ "${KEEP_CLUSTER:-0}" = 1 ]; then
    echo "cluster $CLUSTER kept (kubectl config use-context kind-$CLUSTER); delete with: kind delete cluster --name $CLUSTER"
  fi
}
trap cleanup EXIT

for tool in docker kind kubectl helm git curl jq; do
  command -v "$tool" >/dev/null || {
    echo "missing tool: $tool (see test/e2e/README.md)" >&2
    exit 2
  }
done

api() { # method path [json]
  local args=(-sS -H "Authorization: Bearer $ADMIN_TOKEN" -X "$1" "$API$2")
  [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' -d "$3")
  curl "${args[@]}"
}

step "building $IMAGE"
docker build -t "$IMAGE" "$ROOT"
# the clone init container of step pods (the chart's cloneImage, tagged like image.tag)
docker build -f "$ROOT/docker/clone.Dockerfile" -t "triad-clone:${IMAGE##*:}" "$ROOT/docker"
docker pull -q "$STEP_IMAGE" >/dev/null
docker pull -q postgres:17-alpine >/dev/null

if kind get clusters | grep -qx "$CLUSTER"; then
  [ "${REUSE_CLUSTER:-0}" = 1 ] || {
    echo "kind cluster $CLUSTER exists; set REUSE_CLUSTER=1 to use it or delete it" >&2
    exit 2
  }
  step "reusing kind cluster $CLUSTER"
else
  step "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 120s
  CREATED_CLUSTER=1
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

step "loading images into the cluster"
kind load docker-image --name "$CLUSTER" "$IMAGE" "triad-clone:${IMAGE##*:}" "$STEP_IMAGE" postgres:17-alpine

step "installing PostgreSQL and the chart"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f "$ROOT/manifests/postgres.example.yaml"
kubectl -n "$NS" rollout status deploy/postgres --timeout=180s
helm upgrade --install triad "$ROOT/charts/triad" -n "$NS" \
  --set image.repository=triad --set image.tag=e2e --set image.pullPolicy=Never \
  --set secrets.adminToken="$ADMIN_TOKEN" --set secrets.agentToken="$AGENT_TOKEN" \
  --set database.url=postgres://triad:triad@postgres.$NS.svc:5432/triad \
  --set agent.autoscaling.mode=none --set agent.replicas=1 \
  --set agent.steps.pendingTimeoutSeconds=180 \
  --wait --timeout 5m
kubectl -n "$NS" rollout status deploy/triad --timeout=180s
kubectl -n "$NS" rollout status deploy/triad-agent --timeout=180s

step "port-forwarding the server to $API"
kubectl -n "$NS" port-forward svc/triad "$LOCAL_PORT:3000" >"$WORK/pf.log" 2>&1 &
PF_PID=$!
for _ in $(seq 1 60); do
  curl -fsS "$API/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fsS "$API/readyz" >/dev/null || fail "server not ready through the port-forward"
pass "server ready"

step "creating org e2e and git repository hello"
api POST /api/v1/orgs '{"name":"e2e"}' | jq -c . || true
created=$(api POST /api/v1/orgs/e2e/repos '{"name":"hello","vcs":"git"}')
echo "$created" | jq -c '.data | {name, vcs, clone_url}'
[ "$(echo "$created" | jq -r '.data.vcs')" = git ] || fail "repository not created: $created"

step "pushing a commit with .pipeline.yml"
git init -q -b main "$WORK/repo"
cat >"$WORK/repo/.pipeline.yml" <<YAML
steps:
  - name: hello
    image: $STEP_IMAGE
    commands: ["echo hello"]
  - name: fail
    image: $STEP_IMAGE
    commands: ["exit 3"]
YAML
git -C "$WORK/repo" add .pipeline.yml
git -C "$WORK/repo" -c user.name=e2e -c user.email=e2e@localhost commit -qm "pipeline"
git -C "$WORK/repo" push -q "http://e2e:$ADMIN_TOKEN@127.0.0.1:$LOCAL_PORT/e2e/hello" main
pass "pushed $(git -C "$WORK/repo" rev-parse --short HEAD)"

step "waiting for pipeline 1 to end (up to $TIMEOUT s)"
deadline=$((SECONDS + TIMEOUT))
last=""
while :; do
  p=$(api GET /api/v1/repos/e2e/hello/pipelines/1 || true)
  now=$(echo "$p" | jq -r '[.status, ((.steps // []) | map("\(.name)=\(.status)") | join(" "))] | join("  ")' 2>/dev/null || echo "?")
  [ "$now" != "$last" ] && echo "  $(date +%T) $now" && last=$now
  case $(echo "$p" | jq -r .status 2>/dev/null) in success | failure | cancelled | error) break ;; esac
  [ $SECONDS -lt $deadline ] || fail "pipeline did not end within $TIMEOUT s"
  sleep 2
done

step "checking the results"
echo "$p" | jq '{status, error_message, steps: [.steps[] | {number, name, status, exit_code}]}'
[ "$(echo "$p" | jq -r .status)" = failure ] || fail "pipeline status is $(echo "$p" | jq -r .status), want failure"
pass "pipeline failure"
[ "$(echo "$p" | jq -r '.steps[0].status')" = success ] || fail "step 1 status is not success"
log1=$(api GET /api/v1/repos/e2e/hello/pipelines/1/steps/1/log)
printf '  step 1 log:\n%s\n' "$(echo "$log1" | sed 's/^/    | /')"
echo "$log1" | grep -qx hello || fail "step 1 log has no 'hello' line"
pass "step 1 success with log 'hello'"
[ "$(echo "$p" | jq -r '.steps[1].status')" = failure ] || fail "step 2 status is not failure"
[ "$(echo "$p" | jq -r '.steps[1].exit_code')" = 3 ] || fail "step 2 exit_code is not 3"
pass "step 2 failure with exit_code 3"

step "checking that step pods and the workspace PVC were removed"
for _ in $(seq 1 30); do
  left=$(kubectl -n "$NS" get pods,pvc -l app.kubernetes.io/managed-by=triad-agent -o name 2>/dev/null | wc -l)
  [ "$left" -eq 0 ] && break
  sleep 2
done
[ "$left" -eq 0 ] || fail "step pods or PVCs left: $(kubectl -n "$NS" get pods,pvc -l app.kubernetes.io/managed-by=triad-agent -o name)"
pass "no leftovers"

printf '\n\033[32mALL CHECKS PASSED\033[0m\n'
