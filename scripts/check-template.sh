#!/usr/bin/env bash
# Checks the SAM template without an AWS account and without containers:
#
#   1. cfn-lint template.yaml (the defaults: the dev profile)
#   2. sam validate --lint
#   3. cfn-lint of the production profile: the template transformed by the SAM translator (cfn-lint ignores
#      --parameters on an untransformed SAM template), linted with the parameter values of samconfig.toml's
#      [production] environment, plus a fine-grained access control master user
#   4. sam build into a temporary directory (BuildMethod: makefile everywhere: code is copied, the deps
#      layer's wheels are downloaded for python3.13/arm64 by pip, nothing is compiled or run in Docker)
#   5. a cold-start smoke test of the built code: every built function module is imported by Python 3.13
#      from the built memlane layer, with the deps layer's requirements installed for this machine,
#      under an AWS-mode environment (no AWS call is made: clients are only constructed), and counts
#      tokens with the tokenizer the layers ship (context cards). Skipped, with
#      a note, when no python3.13 is found (PATH, then pyenv).
#
# SAM CLI conflicts with the main environment's packages, so it lives in its own venv (.venv-sam, made
# here when missing). Settings (environment): SAM_CLI_VERSION (1.170.0), MEMLANE_CHECK_CACHE
# (~/.cache/memlane-check: the smoke test's installed deps, keyed by the requirements' hash), KEEP_BUILD=1
# (keep and print the build directory).
set -euo pipefail
cd "$(dirname "$0")/.."

SAM_CLI_VERSION="${SAM_CLI_VERSION:-1.170.0}"
VENV=.venv-sam
CACHE="${MEMLANE_CHECK_CACHE:-$HOME/.cache/memlane-check}"

log() { printf '[check-template] %s\n' "$*" >&2; }
die() { printf '[check-template] FAILED: %s\n' "$*" >&2; exit 1; }

if [[ ! -x "$VENV/bin/sam" ]] || [[ "$("$VENV/bin/sam" --version 2>/dev/null)" != *" $SAM_CLI_VERSION" ]]; then
  log "installing aws-sam-cli==$SAM_CLI_VERSION into $VENV (pip)"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "aws-sam-cli==$SAM_CLI_VERSION" || die "pip install of aws-sam-cli"
fi
SAM="$VENV/bin/sam"
CFN_LINT="$(command -v cfn-lint || echo "$VENV/bin/cfn-lint")"

# No real account is ever reached: dummy credentials, a fixed region, no telemetry.
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export SAM_CLI_TELEMETRY=0
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_SECURITY_TOKEN

log "1/5 cfn-lint $("$CFN_LINT" --version 2>&1 | awk '{print $NF}')"
"$CFN_LINT" template.yaml || die "cfn-lint"

log "2/5 sam validate --lint"
"$SAM" validate --lint --template-file template.yaml >/dev/null || die "sam validate --lint"

BUILD="$(mktemp -d "${TMPDIR:-/tmp}/memlane-sam-build.XXXXXX")"
cleanup() { if [[ "${KEEP_BUILD:-}" == 1 ]]; then log "build kept in $BUILD"; else rm -rf "$BUILD"; fi; }
trap cleanup EXIT

log "3/5 cfn-lint of the production profile (samconfig.toml [production])"
# The SAM translator, as `sam deploy` runs it, with code locations standing in for what `sam package` uploads.
"$VENV/bin/python" - template.yaml >"$BUILD/transformed.json" <<'PY' || die "the SAM translator refused the template"
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

template = yaml_parse(open(sys.argv[1]).read())
for resource in template["Resources"].values():
    for key in ("CodeUri", "ContentUri"):
        if isinstance(resource.get("Properties", {}).get(key), str):
            resource["Properties"][key] = "s3://memlane-check/code.zip"

class NoManagedPolicies:  # the template names none by name; nothing is looked up in IAM
    def load(self):
        return {}

json.dump(transform(template, {}, NoManagedPolicies()), sys.stdout)
PY
mapfile -t PRODUCTION < <("$VENV/bin/python" -c 'import tomllib; c = tomllib.load(open("samconfig.toml", "rb"))["production"]["deploy"]["parameters"]
print(c["region"]); print(*c["parameter_overrides"], sep="\n")') || die "reading samconfig.toml [production]"
"$CFN_LINT" "$BUILD/transformed.json" --regions "${PRODUCTION[0]}" --parameters "${PRODUCTION[@]:1}" \
  "OpenSearchMasterUserArn=arn:aws:iam::123456789012:role/memlane-opensearch-admin" ||
  die "cfn-lint of the production profile"

find_python313() { # the first python3.13 that runs (a pyenv shim may exist without the version selected)
  local root candidate
  root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for candidate in $(command -v python3.13 || true) $(compgen -G "$root/versions/3.13*/bin/python3.13" | sort -rV); do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13)' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}
PY313="$(find_python313 || true)"
# The layers are compiled for the runtime with it (layers/*/Makefile); without one they ship as source.
if [[ -n "$PY313" ]]; then export PYTHON313="$PY313"; fi

log "4/5 sam build (no containers) into $BUILD"
"$SAM" build --template-file template.yaml --build-dir "$BUILD/out" >"$BUILD/build.log" 2>&1 ||
  { tail -n 40 "$BUILD/build.log" >&2; die "sam build"; }
for dir in "$BUILD"/out/*/; do
  printf '[check-template]     %-14s %s\n' "$(basename "$dir")" "$(du -sh "$dir" | cut -f1)" >&2
done

if [[ -z "$PY313" ]]; then
  log "5/5 smoke import SKIPPED: no python3.13 here (PATH or pyenv); the build itself passed"
  exit 0
fi

log "5/5 smoke import of the built functions with $("$PY313" --version 2>&1)"
HOST_ARCH="$(uname -m)"
DEPS="$CACHE/deps-$(cat layers/deps/requirements*.txt layers/deps/Makefile | sha256sum | cut -c1-16)-$HOST_ARCH"
if [[ ! -f "$DEPS/.ready" ]]; then
  rm -rf "$DEPS"
  mkdir -p "$DEPS"
  # The deps layer's own recipe, for this machine's platform instead of the Lambda's.
  make -s -C layers/deps build-DepsLayer ARTIFACTS_DIR="$DEPS" ARCH="$HOST_ARCH" >/dev/null ||
    die "installing the deps layer's requirements for $HOST_ARCH"
  touch "$DEPS/.ready"
fi
for function in Ingest Search Tasks Extract Dream; do
  (
    cd "$BUILD/out/$function"
    env -i PATH="$PATH" HOME="$HOME" \
      AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
      AWS_LAMBDA_FUNCTION_NAME="memlane-$function" POWERTOOLS_SERVICE_NAME="$(tr '[:upper:]' '[:lower:]' <<<"$function")" \
      MEMLANE_MODE=aws MEMLANE_AUTH=iam MEMLANE_TABLE=dynamodb MEMLANE_TABLE_NAME=memlane-smoke \
      MEMLANE_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/memlane-smoke \
      MEMLANE_INDEX=opensearch \
      MEMLANE_OPENSEARCH_URL=https://search-memlane-smoke-abc123.us-east-1.es.amazonaws.com \
      MEMLANE_EMBEDDER=bedrock MEMLANE_LLM=bedrock MEMLANE_RERANKER=bedrock MEMLANE_DATA_DIR=/tmp/memlane-smoke MEMLANE_SCHEMA_POLICY=off \
      "$PY313" -I -c 'import sys; sys.path[:0] = [".", *sys.argv[1].split(":")]; import app; assert callable(app.lambda_handler)
from memlane.adapters.tokenizers.hf import HFTokenizer; assert HFTokenizer().count("context cards count tokens") == 5' \
      "$BUILD/out/MemlaneLayer/python:$DEPS/python" >"$BUILD/smoke-$function.log" 2>&1 ||
      { cat "$BUILD/smoke-$function.log" >&2; exit 1; }
  ) || die "the built $function does not import under Python 3.13"
  log "    $function: imports, builds its adapters, exposes lambda_handler"
done
log "OK"
