"""Seed a `memlane serve` for fuzzing, and write the schemathesis configuration that aims at the seed.

Two tenants of one app, each with its own key and data: `alice` is the tenant the fuzzer acts as;
`bob` is the other tenant, whose every text carries a unique marker that no response to alice's key
may ever contain (scripts/fuzz/hooks.py checks it). Ids the fuzzer draws come from the seed — memory
ids, request ids, runs, dream tasks and actions, an erasure — so operations reach the core instead of
stopping at 404; a few of bob's ids are mixed in, and they must answer exactly like unknown ids.

    python scripts/fuzz/seed.py keys DATA_DIR            > keys.json   (before the server starts)
    python scripts/fuzz/seed.py data URL keys.json OUT_DIR             (writes seed.json, schemathesis.toml)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memlane.client import MemlaneClient

STORE, APP, SCRATCH_APP = "demo", "travel", "scratch"
ALICE, BOB = "alice", "bob"
BOB_MARKER = "zqxbobmarker7"  # in every text of bob's: no answer to alice may contain it
KEEP_RUNS = [f"r{i}" for i in range(1, 4)]  # read and written by every operation
DISPOSABLE_RUNS = [f"d{i}" for i in range(1, 13)]  # only DELETE .../runs/{run_id} draws these, under AGENTS[0]
DISPOSABLE_MEMORY_RUNS = [f"m{i}" for i in range(1, 7)]  # memories only DELETE .../memories/{id} draws
AGENTS = ["planner", "concierge"]
DISPOSABLE_THREADS = [f"t{i}" for i in range(1, 61)]  # threads of AGENTS[0] only DELETE .../threads/{id} draws
HOBBIES = ["collect vintage maps of Portugal", "play the cello in a community orchestra",
           "grow tomatoes on my balcony every summer", "keep two beehives in my garden",
           "run a book club for science fiction", "restore old bicycles in my garage"]
TURNS = [
    ("user", "I am vegetarian and I never take overnight flights."),
    ("assistant", "Noted: daytime flights and vegetarian restaurants."),
    ("user", "I prefer window seats and I live in Boston."),
    ("user", "My passport expires in March 2027."),
    ("user", "I moved from Boston to Denver last month."),
]


def keys(data_dir: str) -> dict[str, str]:
    """API keys, written to the data dir before the server starts (so it requires keys)."""
    from memlane.bootstrap import build
    from memlane.config import Settings
    from memlane.services import access

    deps = build(Settings.from_env(env={}, data_dir=Path(data_dir), embedder="hashing", reranker="none"))
    return {"admin": access.create_api_key(deps, "fuzz-ops", {}, admin=True),
            # one tenant, in its app and in a scratch app where the fuzzer may erase it
            ALICE: access.create_api_key(deps, "alice-app", {APP: [ALICE], SCRATCH_APP: [ALICE]}),
            BOB: access.create_api_key(deps, "bob-app", {APP: [BOB]})}


def _tenant(client: MemlaneClient, tenant: str, marker: str = "") -> dict[str, Any]:
    """Messages and memories in every run, a dream with pending actions, an applied profile."""
    seen: dict[str, Any] = {"request_ids": [], "keep_memory_ids": [], "disposable_memory_ids": []}
    for i, run in enumerate(KEEP_RUNS + DISPOSABLE_RUNS + DISPOSABLE_MEMORY_RUNS):
        agent = AGENTS[0] if run in DISPOSABLE_RUNS else AGENTS[i % len(AGENTS)]
        scope = {"app_id": APP, "tenant_id": tenant, "agent_id": agent, "run_id": run}
        turns = [{"role": role, "name": tenant.title(), "content": f"{text} {marker}".strip()}
                 for role, text in TURNS[i % 2:i % 2 + 3]]
        if run in DISPOSABLE_MEMORY_RUNS:  # a fact of its own: the same turns again would be a NOOP, no memory
            hobby = HOBBIES[DISPOSABLE_MEMORY_RUNS.index(run)]
            turns = [{"role": "user", "name": tenant.title(), "content": f"I {hobby}. {marker}".strip()}]
        task = client.add(STORE, scope, messages=turns, sync=True, request_id=f"{tenant[0]}{i:02d}-{run}",
                          metadata={"topic": "travel", "seed": marker or "plain"})
        seen["request_ids"].append(task["request_id"])
        ids = [m["memory_id"] for m in task.get("memories", [])]
        seen["disposable_memory_ids" if run in DISPOSABLE_MEMORY_RUNS else "keep_memory_ids"] += ids
        if run in KEEP_RUNS:  # a second, asynchronous add: its task is listed like any other
            seen["request_ids"].append(client.add(STORE, scope, text=f"{tenant.title()} likes jazz. {marker}".strip(),
                                                  request_id=f"{tenant[0]}{i:02d}-async")["request_id"])
    tenant_scope = {"app_id": APP, "tenant_id": tenant}
    profile = client._call("POST", f"/v1/stores/{STORE}/dream", {"scope": tenant_scope, "mode": "safe_auto",
                                                                  "threshold": 0.0, "kinds": ["EMIT_PROFILE"],
                                                                  "sync": True})
    proposal = client._call("POST", f"/v1/stores/{STORE}/dream", {"scope": tenant_scope, "mode": "proposal",
                                                                   "sync": True})
    seen["dream_task_ids"] = [profile["task_id"], proposal["task_id"]]
    seen["action_ids"] = profile["action_ids"] + proposal["action_ids"]
    for thread in DISPOSABLE_THREADS:
        client.create_thread(STORE, {**tenant_scope, "agent_id": AGENTS[0]}, thread_id=thread)
        client.add(STORE, {**tenant_scope, "agent_id": AGENTS[0], "run_id": thread},
                   text=f"{tenant.title()} asked about trains. {marker}".strip())
    client.put_profile(STORE, tenant, app_id=APP, text=f"{tenant.title()} is a premium customer. {marker}".strip(),
                       attributes={"home_airport": "LIS"})
    for agent in AGENTS:
        client.put_agent_profile(STORE, agent, app_id=APP, tenant_id=tenant,
                                 text=f"You are {tenant.title()}'s {agent}. {marker}".strip())
    for i, run in enumerate(KEEP_RUNS):  # a summary per kept thread (the store keeps no recent turn out)
        task = client.refresh_summary(STORE, run, app_id=APP, tenant_id=tenant, agent_id=AGENTS[i % len(AGENTS)],
                                      wait=True)
        assert task["status"] == "SUCCEEDED", task
    return seen


def data(url: str, keys_file: str, out_dir: str) -> dict[str, Any]:
    keyring = json.loads(Path(keys_file).read_text())
    MemlaneClient(url, api_key=keyring["admin"]).create_store(STORE, summary_keep_recent=0)
    alice = _tenant(MemlaneClient(url, api_key=keyring[ALICE]), ALICE)
    bob = _tenant(MemlaneClient(url, api_key=keyring[BOB]), BOB, BOB_MARKER)
    erasure = MemlaneClient(url, api_key=keyring[ALICE])._call("POST", "/v1/tenants/erase",
                                                                {"app_id": SCRATCH_APP, "tenant_id": ALICE})
    seed = {"alice": {**alice, "erasure_ids": [erasure["erasure_id"]]}, "bob": bob, "bob_marker": BOB_MARKER}
    out = Path(out_dir)
    (out / "seed.json").write_text(json.dumps(seed, indent=1))
    (out / "schemathesis.toml").write_text(config(seed))
    return seed


def _with_one_foreign(own: list[str], foreign: list[str], size: int = 20) -> list[str]:
    """The tenant's ids, repeated to `size - 1` entries, and one of the other tenant's: drawn one time in
    `size`, it must answer exactly like an unknown id."""
    padded = [own[i % len(own)] for i in range(max(size - 1, len(own)))] if own else []
    return padded + foreign[:1]


def _values(values: list[str]) -> str:
    return json.dumps(values)


def config(seed: dict[str, Any]) -> str:
    """Parameters drawn from the seed. Scope fields are alice's nine times in ten (the tenth is generated:
    invalid or outside the grant); ids are alice's, with one of bob's in each pool, which must 404."""
    a, b = seed["alice"], seed["bob"]
    pools = {
        "memory_ids": _with_one_foreign(a["keep_memory_ids"], b["keep_memory_ids"]),
        "disposable_memory_ids": a["disposable_memory_ids"],
        "request_ids": _with_one_foreign(a["request_ids"], b["request_ids"]),
        "dream_task_ids": _with_one_foreign(a["dream_task_ids"], b["dream_task_ids"]),
        "action_ids": _with_one_foreign(a["action_ids"], b["action_ids"]),
        "erasure_ids": a["erasure_ids"],
        "runs": KEEP_RUNS,
        "disposable_runs": DISPOSABLE_RUNS,
        "planner_threads": [r for i, r in enumerate(KEEP_RUNS) if AGENTS[i % len(AGENTS)] == AGENTS[0]],
        "disposable_threads": DISPOSABLE_THREADS,
        "agents": AGENTS,
        "apps": [APP],
        "tenants": [ALICE],
        "stores": [STORE],
    }
    lines = ["# written by scripts/fuzz/seed.py for one fuzzing run", "[dictionaries]"]
    lines += [f"{name} = {{ values = {_values(values)} }}" for name, values in pools.items() if values]
    bind = {
        "path.memory_id": ("memory_ids", 0.97), "path.request_id": ("request_ids", 0.97),
        "path.task_id": ("dream_task_ids", 0.97), "path.action_id": ("action_ids", 0.97),
        "path.erasure_id": ("erasure_ids", 0.97), "path.run_id": ("runs", 0.97),
        "path.thread_id": ("planner_threads", 0.97),
        "query.agent_id": ("agents", 0.9), "query.run_id": ("runs", 0.9),
        "body.scope.agent_id": ("agents", 0.9), "body.scope.run_id": ("runs", 0.9),
    }
    lines.append("[parameters]")
    lines += [f'"{key}" = {{ dictionary = "{name}", probability = {p} }}' for key, (name, p) in bind.items()]
    # the tenant's own app and id always (optional in the schema, so a dictionary would mostly be skipped):
    # requests outside the grant are the isolation tests' job; here they would only stop at 403
    fixed = {"path.store": STORE, "path.tenant_id": ALICE, "query.app_id": APP, "query.tenant_id": ALICE,
             "body.scope.app_id": APP, "body.scope.tenant_id": ALICE, "body.app_id": APP, "body.tenant_id": ALICE,
             "path.agent_id": AGENTS[0]}  # an agent whose profile the seed stated
    lines += [f'"{key}" = "{value}"' for key, value in fixed.items()]
    # destructive operations draw from their own pools, so the ids every other operation reads survive
    for name, params in (
            ("DELETE /v1/stores/{store}/memories/{memory_id}", {"path.memory_id": "disposable_memory_ids"}),
            ("DELETE /v1/stores/{store}/runs/{run_id}", {"path.run_id": "disposable_runs"}),
            ("DELETE /v1/stores/{store}/threads/{thread_id}", {"path.thread_id": "disposable_threads"})):
        if not all(pools.get(v) for v in params.values()):
            raise SystemExit(f"the seed left no ids for {name}: {params}")
        lines += ["[[operations]]", f'include-name = "{name}"', "[operations.parameters]"]
        lines += [f'"{k}" = {{ dictionary = "{v}", probability = 0.97 }}' for k, v in params.items()]
        if "threads" in name or "runs" in name:  # the seeded ones are AGENTS[0]'s: found by id, or by id and agent
            # (a run named whole is deleted idempotently; without its agent, one deleted already is a 404)
            lines.append(f'"query.agent_id" = "{AGENTS[0]}"')
    lines += ["[[operations]]", 'include-name = "POST /v1/tenants/erase"', "[operations.parameters]",
              f'"body.app_id" = "{SCRATCH_APP}"']
    # a run's messages need all four scope fields: a seeded run with its agent
    lines += ["[[operations]]", f'include-name = "GET /v1/stores/{{store}}/messages"', "[operations.parameters]",
              f'"query.agent_id" = "{AGENTS[0]}"', f'"query.run_id" = "{KEEP_RUNS[0]}"']
    lines += ["[[operations]]", 'include-name = "GET /v1/stores/{store}/threads/{thread_id}"',
              "[operations.parameters]", f'"query.agent_id" = "{AGENTS[0]}"']
    # a context card is of a seeded thread (a run), under the agent it was held with
    lines += ["[[operations]]", f'include-name = "POST /v1/stores/{{store}}/threads/{{thread_id}}/context"',
              "[operations.parameters]", f'"path.thread_id" = "{KEEP_RUNS[0]}"', f'"body.agent_id" = "{AGENTS[0]}"']
    # a thread's summary is addressed by its agent too: a seeded thread with its agent
    for method in ("GET", "POST"):
        lines += ["[[operations]]", f'include-name = "{method} /v1/stores/{{store}}/threads/{{thread_id}}/summary"',
                  "[operations.parameters]", f'"query.agent_id" = "{AGENTS[0]}"', f'"path.thread_id" = "{KEEP_RUNS[0]}"']
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1] == "keys":
        print(json.dumps(keys(sys.argv[2])))
    else:
        seeded = data(sys.argv[2], sys.argv[3], sys.argv[4])
        print(f"seeded: {sum(len(v) for v in seeded['alice'].values())} ids of alice, "
              f"{sum(len(v) for v in seeded['bob'].values())} of bob", file=sys.stderr)
