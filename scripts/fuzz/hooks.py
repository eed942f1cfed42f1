"""schemathesis hooks for scripts/fuzz-api.sh (loaded with SCHEMATHESIS_HOOKS=hooks, scripts/fuzz on the path).

* Links between operations for the stateful phase: an add's `request_id` feeds the task routes, a
  search's or a list's `memory_id` the memory routes, a dream's `task_id` and `action_ids` the dream
  routes, an erasure's `erasure_id` its status — so sequences reach state the fuzzer itself created.
* A check that no answer to the fuzzing tenant's key carries the other tenant's data (its marker).
* A tally of the status (and error code) of every answer per operation, written at exit to
  MEMLANE_FUZZ_STATS for the 404 ratio; MEMLANE_FUZZ_BY_PHASE=1 splits it by schemathesis phase.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import schemathesis

import ast_guard

ast_guard.install()

SEED = json.loads(Path(os.environ["MEMLANE_FUZZ_SEED"]).read_text())
STATS = Path(os.environ["MEMLANE_FUZZ_STATS"])
_lock = threading.Lock()
_statuses: Counter[str] = Counter()
_by_operation: dict[str, Counter[str]] = {}

S = "/v1/stores/{store}"
# (source operation, status, link name, target operation, parameters)
LINKS: list[tuple[str, str, str, str, dict[str, str]]] = [
    (f"POST {S}/memories", "202", "GetTask", f"GET {S}/tasks/{{request_id}}",
     {"store": "$request.path.store", "request_id": "$response.body#/request_id"}),
    (f"POST {S}/memories", "200", "GetSyncTask", f"GET {S}/tasks/{{request_id}}",
     {"store": "$request.path.store", "request_id": "$response.body#/request_id"}),
    (f"POST {S}/memories", "200", "GetAddedMemory", f"GET {S}/memories/{{memory_id}}",
     {"store": "$request.path.store", "memory_id": "$response.body#/memories/0/memory_id",
      "app_id": "$request.body#/scope/app_id", "tenant_id": "$request.body#/scope/tenant_id"}),
    (f"POST {S}/memories", "202", "ListRunMessages", f"GET {S}/messages",
     {"store": "$request.path.store", "app_id": "$request.body#/scope/app_id",
      "tenant_id": "$request.body#/scope/tenant_id", "agent_id": "$request.body#/scope/agent_id",
      "run_id": "$request.body#/scope/run_id"}),
    (f"GET {S}/tasks", "200", "GetListedTask", f"GET {S}/tasks/{{request_id}}",
     {"store": "$request.path.store", "request_id": "$response.body#/tasks/0/request_id"}),
    (f"GET {S}/tasks", "200", "RetryListedTask", f"POST {S}/tasks/{{request_id}}/retry",
     {"store": "$request.path.store", "request_id": "$response.body#/tasks/0/request_id"}),
    (f"POST {S}/memories", "202", "RetryTask", f"POST {S}/tasks/{{request_id}}/retry",
     {"store": "$request.path.store", "request_id": "$response.body#/request_id"}),
    (f"POST {S}/search", "200", "GetFoundMemory", f"GET {S}/memories/{{memory_id}}",
     {"store": "$request.path.store", "memory_id": "$response.body#/results/0/memory_id",
      "app_id": "$request.body#/scope/app_id", "tenant_id": "$request.body#/scope/tenant_id"}),
    (f"POST {S}/search", "200", "PatchFoundMemory", f"PATCH {S}/memories/{{memory_id}}",
     {"store": "$request.path.store", "memory_id": "$response.body#/results/0/memory_id"}),
    (f"GET {S}/memories", "200", "GetListedMemory", f"GET {S}/memories/{{memory_id}}",
     {"store": "$request.path.store", "memory_id": "$response.body#/memories/0/memory_id",
      "app_id": "$request.query.app_id", "tenant_id": "$request.query.tenant_id"}),
    (f"POST {S}/dream", "202", "GetDreamTask", f"GET {S}/dream-tasks/{{task_id}}",
     {"store": "$request.path.store", "task_id": "$response.body#/task_id"}),
    (f"POST {S}/dream", "200", "ListDreamActions", f"GET {S}/dream-tasks/{{task_id}}/actions",
     {"store": "$request.path.store", "task_id": "$response.body#/task_id"}),
    (f"POST {S}/dream", "200", "GetDreamAction", f"GET {S}/dream-actions/{{action_id}}",
     {"store": "$request.path.store", "action_id": "$response.body#/action_ids/0"}),
    (f"GET {S}/dream-tasks", "200", "GetListedDreamTask", f"GET {S}/dream-tasks/{{task_id}}",
     {"store": "$request.path.store", "task_id": "$response.body#/tasks/0/task_id"}),
    (f"GET {S}/dream-tasks/{{task_id}}/actions", "200", "ApplyAction", f"POST {S}/dream-actions/{{action_id}}/apply",
     {"store": "$request.path.store", "action_id": "$response.body#/actions/0/action_id"}),
    (f"GET {S}/dream-tasks/{{task_id}}/actions", "200", "RejectAction",
     f"POST {S}/dream-actions/{{action_id}}/reject",
     {"store": "$request.path.store", "action_id": "$response.body#/actions/0/action_id"}),
    (f"POST {S}/dream-actions/{{action_id}}/apply", "200", "UndoAction", f"POST {S}/dream-actions/{{action_id}}/undo",
     {"store": "$request.path.store", "action_id": "$request.path.action_id"}),
    (f"GET {S}/scopes", "200", "ListScopeMessages", f"GET {S}/messages",
     {"store": "$request.path.store", "app_id": "$response.body#/scopes/0/scope/app_id",
      "tenant_id": "$response.body#/scopes/0/scope/tenant_id", "agent_id": "$response.body#/scopes/0/scope/agent_id",
      "run_id": "$response.body#/scopes/0/scope/run_id"}),
    ("POST /v1/tenants/erase", "202", "GetErasure", "GET /v1/erasures/{erasure_id}",
     {"erasure_id": "$response.body#/erasure_id"}),
]


SCOPE = {"app_id": "travel", "tenant_id": "alice", "agent_id": "planner", "run_id": "r1"}
# request bodies for the examples phase: valid, deep requests the random phases rarely hit at once
EXAMPLES: dict[str, dict[str, Any]] = {
    f"POST {S}/memories": {"scope": SCOPE, "text": "Alice books a window seat to Lisbon in May.", "sync": True},
    f"POST {S}/search": {"query": "where does Alice live", "scope": {"app_id": "travel", "tenant_id": "alice",
                                                                   "run_id": "*"}, "include_evidence": True},
    f"POST {S}/dream": {"scope": {"app_id": "travel", "tenant_id": "alice"}, "mode": "proposal", "sync": True},
    f"PUT {S}/access-policy": {"scope": SCOPE, "access_policy": "recall_and_store"},
    f"PATCH {S}/memories/{{memory_id}}": {"app_id": "travel", "tenant_id": "alice", "importance": 0.7},
}


@schemathesis.hook
def before_load_schema(context: Any, raw_schema: dict[str, Any]) -> None:
    """Add the OpenAPI links (the API's document does not declare them; Powertools cannot emit them) and
    request examples."""
    for label, example in EXAMPLES.items():
        method, path = label.split(" ", 1)
        raw_schema["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["example"] = example
    ids = {}
    for path, methods in raw_schema.get("paths", {}).items():
        for method, op in methods.items():
            if isinstance(op, dict) and "operationId" in op:
                ids[f"{method.upper()} {path}"] = op["operationId"]
    for source, status, name, target, params in LINKS:
        method, path = source.split(" ", 1)
        op = raw_schema["paths"][path][method.lower()]
        response = op.setdefault("responses", {}).setdefault(status, {"description": "linked"})
        response.setdefault("links", {})[name] = {"operationId": ids[target], "parameters": params}


@schemathesis.check
def no_other_tenants_data(ctx: Any, response: Any, case: Any) -> bool | None:
    """The fuzzing key is one tenant's: no answer may carry the other tenant's marker or ids."""
    text = response.text or ""
    if SEED["bob_marker"] in text:
        raise AssertionError(f"the answer carries the other tenant's marker {SEED['bob_marker']!r}")
    for kind in ("keep_memory_ids", "request_ids", "dream_task_ids", "action_ids"):
        for foreign in SEED["bob"][kind]:
            if foreign in text and response.status_code < 400:
                raise AssertionError(f"the answer carries the other tenant's {kind[:-1]} {foreign!r}")
    return None


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    status = str(response.status_code)
    label = f"{case.operation.method.upper()} {case.operation.path}"
    if os.environ.get("MEMLANE_FUZZ_BY_PHASE"):
        label += f" [{getattr(getattr(case.meta, 'phase', None), 'name', '?')}]"
    code = ""
    if response.status_code >= 400:
        try:
            code = ":" + str(json.loads(response.text)["error"]["code"])
        except (ValueError, KeyError, TypeError):
            code = ":?"
    with _lock:
        _statuses[status] += 1
        _by_operation.setdefault(label, Counter())[status + code] += 1


@atexit.register
def _write_stats() -> None:
    STATS.write_text(json.dumps({"statuses": _statuses, "by_operation": _by_operation}, indent=1))
