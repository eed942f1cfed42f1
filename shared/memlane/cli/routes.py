"""Which CLI command calls each route of the API (by its SDK name, memlane/sdk/routes.py), the commands that
call a route another command is listed for, and the commands that call none. tests/sdk/test_cli_coverage.py walks /openapi.json and the parser against both, both ways."""

from __future__ import annotations

ROUTE_COMMANDS: dict[str, str] = {
    "stores.create": "stores create",
    "stores.list": "stores list",
    "stores.get": "stores get",
    "stores.update": "stores update",
    "stores.delete": "stores delete",
    "memories.add": "add",  # `memories write` too (infer: false)
    "memories.add_batch": "import",
    "memories.list": "memories list",
    "memories.get": "memories get",
    "memories.update": "memories update",
    "memories.delete": "memories delete",
    "memories.search": "search",
    "messages.list": "messages",
    "tasks.get": "tasks",  # with a request id; without, tasks.list
    "tasks.list": "tasks",
    "tasks.retry": "tasks",  # with --retry and a request id
    "scopes.list": "scopes",
    "scopes.set_access_policy": "access-policy put",
    "runs.delete": "runs delete",
    "erasures.erase": "erase tenant",
    "erasures.get": "erase status",
    "audit.list": "audit",
    "dream.run": "dream run",
    "dream.get": "dream tasks",  # with a task id; without, dream.list
    "dream.list": "dream tasks",
    "dream.actions": "dream actions",
    "dream.get_action": "dream action",
    "dream.apply": "dream apply",
    "dream.reject": "dream reject",
    "dream.undo": "dream undo",
    "threads.create": "threads create",
    "threads.list": "threads list",
    "threads.get": "threads get",
    "threads.delete": "threads delete",
    "threads.context": "context",
    "threads.summary": "summary get",
    "threads.refresh_summary": "summary refresh",
    "profiles.get": "profiles get",  # without --agent; with it, profiles.get_agent
    "profiles.put": "profiles put",
    "profiles.get_agent": "profiles get",
    "profiles.put_agent": "profiles put",
    "profiles.delete": "profiles delete",  # without --agent; with it, profiles.delete_agent
    "profiles.delete_agent": "profiles delete",
}

# Commands that call a route of the table under another name.
ALSO_COMMANDS: dict[str, str] = {
    "memories write": "memories.add",  # infer: false, the memories as given
    "access-policy get": "threads.get",  # a run is a thread: its record carries the policy
}

# Commands that call no route: they run the service, write the table directly, or measure.
LOCAL_COMMANDS: dict[str, str] = {
    "serve": "the local HTTP server",
    "worker": "the jobs of the shared queue, beside servers over shared engines (memlane.worker)",
    "keys create": "an API key and its grant, written to the table",
    "keys list": "the API keys' ids, principals and creation times, read from the table",
    "keys revoke": "withdraw API keys (by key, id or principal) from the table",
    "grants put": "a principal's grant, written to the table",
    "reindex": "rebuild a store's index from the table",
    "fsck": "compare a store's index with its table",
    "readings": "count or write again the stale readings of a store's memories",
    "schema": "check, create or rebuild the table and index",
    "bench": "benchmarks (memlane bench -h)",
    "mcp": "an MCP server over the SDK, in one fixed scope (memlane.mcp)",
}
