#!/usr/bin/env bash
# A bounded schemathesis run against a throw-away Triad server on 127.0.0.1 (see bench/README.md).
#
#   bench/fuzz-openapi.sh            # defaults: 25 examples per operation and phase, 300 s at most
#   FUZZ_EXAMPLES=50 FUZZ_MAX_TIME=600 bench/fuzz-openapi.sh
#
# Installs schemathesis (PyPI, pinned) into bench/.work/venv on first use. Uses the embedded
# PostgreSQL in a temporary directory, or DATABASE_URL when set (use a throw-away database: the
# run creates and changes data). Reports go to bench/.work/fuzz/. Not part of `npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${FUZZ_EXAMPLES:-25}
MAX_TIME=${FUZZ_MAX_TIME:-300}
VENV=bench/.work/venv
WORK=bench/.work/fuzz
NODE=node_modules/.bin/node

if [ ! -x "$VENV/bin/st" ] || [ "$("$VENV/bin/st" --version | awk '{print $3}')" != "$SCHEMATHESIS_VERSION" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS_VERSION"
fi

rm -rf "$WORK" && mkdir -p "$WORK"
"$NODE" bench/fuzz-server.ts "$WORK/server.json" > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  [ -s "$WORK/server.json" ] && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/server.log"; exit 1; }
  sleep 0.5
done
[ -s "$WORK/server.json" ] || { echo "the server did not start" >&2; exit 1; }
URL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$WORK/server.json")
export TRIAD_FUZZ_TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$WORK/server.json")
export TRIAD_FUZZ_AGENT_TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agentToken"])' "$WORK/server.json")

# Two passes on one server: examples, coverage and fuzzing get two thirds of the time, stateful
# sequences (following the Location of created resources) the last third.
run_st() {
  timeout $(($2 + 60)) "$VENV/bin/st" --config-file bench/schemathesis.toml run "$URL/api/v1/openapi.json" \
    --phases "$1" \
    --checks all \
    --max-examples "$EXAMPLES" \
    --max-time "$2" \
    --workers 2 \
    --seed "${FUZZ_SEED:-1}" \
    --request-timeout 40 \
    --max-response-time 35 \
    --generation-database none \
    --report ndjson --report-dir "$WORK" \
    --no-color 2>&1 | tee -a "$WORK/run.txt"
  return "${PIPESTATUS[0]}"
}
set +e
run_st examples,coverage,fuzzing $((MAX_TIME * 2 / 3))
FIRST=$?
run_st stateful $((MAX_TIME / 3))
SECOND=$?
set -e
STATUS=$((FIRST > SECOND ? FIRST : SECOND))
python3 - "$WORK" <<'PY' || true
import collections, glob, json, sys
statuses = collections.Counter()
for path in glob.glob(f"{sys.argv[1]}/ndjson-*.ndjson"):
    for line in open(path):
        event = json.loads(line).get("ScenarioFinished")
        for interaction in (event or {}).get("recorder", {}).get("interactions", {}).values():
            statuses[(interaction.get("response") or {}).get("status_code", "no response")] += 1
print(f"requests recorded: {sum(statuses.values())}; by status: " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items(), key=str)))
PY
echo "schemathesis exit status: $STATUS (reports in $WORK)"
exit "$STATUS"
