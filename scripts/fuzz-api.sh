#!/usr/bin/env bash
# Property-based fuzzing of the HTTP API with schemathesis against a real, *seeded* `memlane serve`
# that requires API keys: a store, two tenants with their own keys and data (scripts/fuzz/seed.py),
# every phase on (examples, coverage, fuzzing, stateful — links between operations come from
# scripts/fuzz/hooks.py), and the fuzzer acting as one tenant with that tenant's key.
# Fails on any 5xx, any answer that breaks the OpenAPI document, any answer that carries the other
# tenant's data, or when 10% or more of the answers are 404 (ids that reach nothing test little).
# Usage: fuzz-api.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
budget=${1:-60}
max_404_ratio=${MEMLANE_FUZZ_MAX_404_RATIO:-0.10}
data=$(mktemp -d)
port=$("$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
"$BIN/python" scripts/fuzz/seed.py keys "$data/store" >"$data/keys.json"
MEMLANE_LOG_LEVEL=WARNING "$BIN/memlane" --data-dir "$data/store" serve --port "$port" >"$data/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 150); do curl -sf "$url/health" >/dev/null && break; sleep 0.2; done
"$BIN/python" scripts/fuzz/seed.py data "$url" "$data/keys.json" "$data"
alice_key=$("$BIN/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["alice"])' "$data/keys.json")
echo "== schemathesis for ${budget}s against $url, as one tenant's key" >&2
status=0
PYTHONPATH="$PWD/scripts/fuzz${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=hooks \
MEMLANE_FUZZ_SEED="$data/seed.json" MEMLANE_FUZZ_STATS="$data/stats.json" \
  "$BIN/schemathesis" --config-file "$data/schemathesis.toml" run "$url/openapi.json" \
  -H "Authorization: Bearer $alice_key" \
  --checks not_a_server_error,response_schema_conformance,no_other_tenants_data \
  --phases examples,coverage,fuzzing,stateful --max-time "$budget" --workers 2 --seed 20261130 || status=$?
"$BIN/python" - "$data/stats.json" "$max_404_ratio" <<'EOF' || status=1
import json, sys
stats = json.load(open(sys.argv[1]))
total = sum(stats["statuses"].values())
ratio = stats["statuses"].get("404", 0) / max(total, 1)
print(f"== {total} answers over {len(stats['by_operation'])} operations; statuses {dict(sorted(stats['statuses'].items()))}")
for op, counts in sorted(stats["by_operation"].items()):
    print(f"   {op:<58} {' '.join(f'{s}:{n}' for s, n in sorted(counts.items()))}")
print(f"== 404 ratio {ratio:.3f} (limit {sys.argv[2]})")
sys.exit(0 if total and ratio < float(sys.argv[2]) else 1)
EOF
if grep -q Traceback "$data/server.log"; then
  echo "server logged an unhandled error:" >&2; grep -A20 Traceback "$data/server.log" >&2; exit 1
fi
exit $status
