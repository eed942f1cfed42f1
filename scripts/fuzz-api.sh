#!/usr/bin/env bash
# Property-based fuzzing of the HTTP API with schemathesis against a real `memlane serve`:
# zero 5xx responses and zero responses that break the OpenAPI document. Usage: fuzz-api.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
budget=${1:-60}
data=$(mktemp -d)
port=$("$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MEMLANE_LOG_LEVEL=WARNING "$BIN/memlane" --data-dir "$data" serve --port "$port" >"$data/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
# a store to fuzz against, so operations reach the core instead of stopping at 404
curl -sf -X POST -H 'Content-Type: application/json' -d '{"name": "demo"}' "http://127.0.0.1:$port/v1/stores" >/dev/null
echo "== schemathesis for ${budget}s against http://127.0.0.1:$port" >&2
"$BIN/schemathesis" run "http://127.0.0.1:$port/openapi.json" \
  --checks not_a_server_error,response_schema_conformance \
  --phases examples,coverage,fuzzing --max-time "$budget" --workers 2 --seed 20261130
if grep -q Traceback "$data/server.log"; then
  echo "server logged an unhandled error:" >&2; grep -A20 Traceback "$data/server.log" >&2; exit 1
fi
