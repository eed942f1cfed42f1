"""Soak: mixed add / search / list load from several tenants, each with its own API key, over HTTP.

    memlane bench soak --clients 8 --seconds 90 [--url URL --admin-key KEY --tenant-key T=KEY ...]
                       [--tenants 4] [--global-lock] [--json PATH]

Without --url it starts its own `memlane serve` (a LocalServer on a temporary data dir, same worker,
same HTTP server) with one key per tenant. Every client thread belongs to one tenant and only ever
uses that tenant's key. While it runs it checks every search answer (a hit of another tenant is a
cross-tenant answer); afterwards it waits for the extraction backlog to drain and verifies that every
accepted add SUCCEEDED, that its messages are readable, and that its memory is found by its own
tenant and by no other. `--global-lock` serialises the API (one request at a time) to measure what
a lock would cost instead of request-scoped state.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ..client import ApiError, MemlaneClient
from .common import machine

OPERATIONS = ("add", "search", "list")
WEIGHTS = (0.4, 0.4, 0.2)
TERMINAL = ("SUCCEEDED", "FAILED")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    p.add_argument("--seconds", type=float, default=60.0, help="load duration (default 60)")
    p.add_argument("--tenants", type=int, default=4, help="tenants, each with its own key (default 4)")
    p.add_argument("--url", help="a running server (default: start one on a temporary data dir)")
    p.add_argument("--admin-key", help="with --url: an admin key (creates the store)")
    p.add_argument("--tenant-key", action="append", default=[], metavar="TENANT=KEY",
                   help="with --url: a key granted app 'soak' and that tenant (repeat per tenant)")
    p.add_argument("--global-lock", action="store_true",
                   help="own server only: one API call at a time (measures the cost of a lock)")
    p.add_argument("--drain-timeout", type=float, default=600.0, help="seconds to wait for the backlog")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", dest="json_out", type=Path)


# -- the server ---------------------------------------------------------------------------------
@dataclass
class Target:
    url: str
    admin_key: str | None
    tenant_keys: dict[str, str]
    queue_depth: Any = None  # a callable, for a server of our own


class _LockedApi:
    """The API behind one global lock: what serialising every request would cost."""

    def __init__(self, api: Any):
        self._api, self._lock = api, threading.Lock()

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._lock:
            return self._api.resolve(event, context)

    def refuse_unauthenticated(self, event: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            return self._api.refuse_unauthenticated(event)


@contextmanager
def own_server(tenants: list[str], *, global_lock: bool) -> Iterator[Target]:
    from ..api.app import build_api
    from ..bootstrap import build_local
    from ..config import Settings
    from ..server import LocalServer
    from ..services import access

    with tempfile.TemporaryDirectory(prefix="memlane-soak-") as tmp:
        service = build_local(Settings.from_env(data_dir=Path(tmp) / "data"))
        admin = access.create_api_key(service.deps, "soak-admin", {}, admin=True)
        keys = {t: access.create_api_key(service.deps, f"soak-{t}", {"soak": [t]}) for t in tenants}
        api = build_api(service.deps, auth="api_key")
        server = LocalServer(service, "127.0.0.1", 0, auth="api_key", api=_LockedApi(api) if global_lock else api)
        thread = threading.Thread(target=server.serve_forever, name="soak-server", daemon=True)
        thread.start()
        try:
            yield Target(server.url, admin, keys, queue_depth=service.queue.pending)
        finally:
            server.shutdown()
            thread.join(30)


# -- the load -----------------------------------------------------------------------------------
@dataclass
class Sent:
    tenant: str
    run: str
    request_id: str
    contents: list[str]
    marker: str


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter = field(default_factory=Counter)  # "op status" → count
    cross_tenant: list[str] = field(default_factory=list)
    accepted: list[Sent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, op: str, seconds: float, status: int | str) -> None:
        with self.lock:
            self.latencies[op].append(seconds)
            self.statuses[f"{op} {status}"] += 1


def _client_loop(n: int, tenant: str, others: list[str], client: MemlaneClient, store: str, deadline: float,
                 tally: Tally, rng: random.Random) -> None:
    run = f"run-{n}"
    scope = {"app_id": "soak", "tenant_id": tenant}
    i = 0
    while time.monotonic() < deadline:
        op = rng.choices(OPERATIONS, WEIGHTS)[0]
        started = time.perf_counter()
        try:
            if op == "add":
                i += 1
                marker = f"{tenant}mk{n}x{i}"  # one word, unique to this add and tenant
                rid = f"soak-{tenant}-{n}-{i}"
                contents = [_statement(rng, marker), f"Noted, {marker}."]
                got = client.add(store, {**scope, "agent_id": "agent", "run_id": run}, request_id=rid,
                                 messages=[{"role": "user", "content": contents[0]},
                                           {"role": "assistant", "content": contents[1]}])
                if got.get("request_id") != rid:
                    tally.cross_tenant.append(f"add {rid} answered as {got.get('request_id')}")
                with tally.lock:
                    tally.accepted.append(Sent(tenant, run, rid, contents, marker))
            elif op == "search":
                hits = client.search(store, f"love the trail {rng.randint(1, max(i, 1))}", scope, top_k=10)
                for hit in hits:
                    if hit["scope"]["tenant_id"] != tenant or any(f"{o}mk" in hit["text"] for o in others):
                        tally.cross_tenant.append(f"{tenant} search got {hit['scope']['tenant_id']}: {hit['text']}")
            else:
                if rng.random() < 0.5:
                    client.messages(store, {**scope, "agent_id": "agent", "run_id": run}, limit=20,
                                    newest_first=True)
                else:
                    found = client.memories(store, scope, limit=20)["memories"]
                    for m in found:
                        if m["scope"]["tenant_id"] != tenant:
                            tally.cross_tenant.append(f"{tenant} list got {m['scope']['tenant_id']}")
            tally.record(op, time.perf_counter() - started, 200)
        except ApiError as error:
            tally.record(op, time.perf_counter() - started, error.status)
        except OSError as error:
            tally.record(op, time.perf_counter() - started, type(error).__name__)


_LIKES = ("kayaking", "jazz", "pottery", "chess", "sourdough", "birdwatching", "opera", "rock climbing", "origami",
          "cycling", "tango", "astronomy", "knitting", "sailing", "calligraphy", "surfing", "board games", "gardening")
_WHEN = ("on Sunday mornings", "after work", "every winter", "during long weekends", "with my sister",
         "when it rains", "on holiday", "before breakfast")
_PLACES = ("Lisbon", "Oslo", "Kyoto", "Denver", "Nairobi", "Hobart", "Quebec", "Valparaiso", "Tallinn", "Cusco")


def _statement(rng: random.Random, marker: str) -> str:
    """A preference the extractor keeps, different enough from the others not to be a near-duplicate,
    with one word (`marker`) unique to this add."""
    return (f"I really love {rng.choice(_LIKES)} and {rng.choice(_LIKES)} {rng.choice(_WHEN)} in "
            f"{rng.choice(_PLACES)}, my friend {marker} knows it.")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _progress(tally: Tally, started: float, seconds: float, stop: threading.Event, target: Target) -> None:
    while not stop.wait(5.0):
        elapsed = time.monotonic() - started
        with tally.lock:
            done = sum(len(v) for v in tally.latencies.values())
            errors = sum(c for k, c in tally.statuses.items() if not k.endswith(" 200"))
            adds = len(tally.accepted)
        depth = target.queue_depth() if target.queue_depth else None
        print(f"  {elapsed:5.0f}/{seconds:.0f}s  {done} requests ({done / elapsed:.1f}/s), {adds} adds accepted, "
              f"{errors} errors, {len(tally.cross_tenant)} cross-tenant"
              + (f", queue {depth}" if depth is not None else ""), file=sys.stderr, flush=True)


# -- afterwards ---------------------------------------------------------------------------------
def _tasks_of(client: MemlaneClient, store: str, tenant: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page = client.list_tasks(store, "soak", tenant, limit=200, cursor=cursor)
        for task in page["tasks"]:
            found[task["request_id"]] = task
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def _drain(clients: dict[str, MemlaneClient], store: str, accepted: list[Sent], timeout: float
           ) -> tuple[dict[str, dict[str, Any]], float, int]:
    """Waits until every accepted add is SUCCEEDED or FAILED; (tasks, seconds waited, backlog at the start)."""
    started = time.monotonic()
    wanted = {s.request_id for s in accepted}
    backlog = None
    while True:
        tasks: dict[str, dict[str, Any]] = {}
        for tenant, client in clients.items():
            tasks.update(_tasks_of(client, store, tenant))
        open_ = [rid for rid in wanted if tasks.get(rid, {}).get("status") not in TERMINAL]
        if backlog is None:
            backlog = len(open_)
        if not open_ or time.monotonic() - started > timeout:
            return tasks, time.monotonic() - started, backlog
        print(f"  draining: {len(open_)} tasks open", file=sys.stderr, flush=True)
        time.sleep(2.0)


def _seconds(a: str, b: str) -> float:
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _verify(clients: dict[str, MemlaneClient], store: str, accepted: list[Sent], tasks: dict[str, dict[str, Any]],
            rng: random.Random, sample: int = 200) -> dict[str, Any]:
    by_status = Counter(tasks.get(s.request_id, {}).get("status", "MISSING") for s in accepted)
    # messages: every accepted add's contents are in its run
    runs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for s in accepted:
        runs[(s.tenant, s.run)].extend(s.contents)
    missing_messages = 0
    for (tenant, run), contents in runs.items():
        scope = {"app_id": "soak", "tenant_id": tenant, "agent_id": "agent", "run_id": run}
        stored: set[str] = set()
        cursor = None
        while True:
            page = clients[tenant].messages(store, scope, limit=200, cursor=cursor)
            stored.update(m["content"] for m in page["messages"])
            cursor = page.get("next_cursor")
            if not cursor:
                break
        missing_messages += sum(1 for c in contents if c not in stored)
    # memories: an add's unique word is found by its tenant, and by no other tenant. A later add may
    # supersede an earlier memory (they say nearly the same thing), so superseded ones are searched too.
    found_own, with_memories, cross = 0, 0, []
    checked = rng.sample(accepted, min(sample, len(accepted)))
    tenants = list(clients)
    for s in checked:
        if not any(o["action"] != "NOOP" for o in tasks.get(s.request_id, {}).get("outcomes", [])):
            continue  # the extractor kept nothing from this add: nothing to find
        with_memories += 1
        hits = clients[s.tenant].search(store, s.marker, {"app_id": "soak", "tenant_id": s.tenant}, top_k=10,
                                        include_superseded=True)
        found_own += any(s.marker in h["text"] for h in hits)
        other = rng.choice([t for t in tenants if t != s.tenant] or [s.tenant])
        if other != s.tenant:
            for h in clients[other].search(store, s.marker, {"app_id": "soak", "tenant_id": other}, top_k=10,
                                           include_superseded=True):
                if s.marker in h["text"] or h["scope"]["tenant_id"] != other:
                    cross.append(f"{other} found {s.tenant}'s {s.marker}")
    lags = [_seconds(t["created_at"], t["updated_at"]) for t in (tasks.get(s.request_id) for s in accepted)
            if t and t["status"] == "SUCCEEDED"]
    return {"tasks": dict(by_status), "missing_messages": missing_messages, "searched": with_memories,
            "found_by_own_tenant": found_own, "cross_tenant_after": cross[:20], "cross_tenant_after_count": len(cross),
            "extraction_lag_s": {"p50": round(percentile(lags, 50), 3), "p95": round(percentile(lags, 95), 3),
                                 "max": round(max(lags, default=0.0), 3)}}


# -- the run ------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    tenants = [f"t{i}" for i in range(args.tenants)]
    rng = random.Random(args.seed)
    if args.url:
        keys = dict(k.split("=", 1) for k in args.tenant_key)
        tenants = list(keys) or tenants
        context: Any = _nullcontext(Target(args.url, args.admin_key, keys))
    else:
        context = own_server(tenants, global_lock=args.global_lock)
    with context as target:
        store = f"soak-{int(time.time())}"
        MemlaneClient(target.url, api_key=target.admin_key).create_store(store)
        clients = {t: MemlaneClient(target.url, api_key=target.tenant_keys.get(t)) for t in tenants}
        tally = Tally()
        print(f"soak: {args.clients} clients, {len(tenants)} tenants, {args.seconds:.0f}s against {target.url}"
              + (" (global lock)" if args.global_lock else ""), file=sys.stderr, flush=True)
        started = time.monotonic()
        deadline = started + args.seconds
        owner = [tenants[n % len(tenants)] for n in range(args.clients)]  # each client keeps one tenant
        threads = [threading.Thread(target=_client_loop, name=f"soak-client-{n}",
                                    args=(n, owner[n], [t for t in tenants if t != owner[n]], clients[owner[n]],
                                          store, deadline, tally, random.Random(args.seed * 1000 + n)))
                   for n in range(args.clients)]
        stop = threading.Event()
        progress = threading.Thread(target=_progress, args=(tally, started, args.seconds, stop, target), daemon=True)
        progress.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stop.set()
        elapsed = time.monotonic() - started
        print("soak: load done; draining extraction", file=sys.stderr, flush=True)
        tasks, drained_s, backlog = _drain(clients, store, tally.accepted, args.drain_timeout)
        verified = _verify(clients, store, tally.accepted, tasks, rng)
    operations = {}
    for op in OPERATIONS:
        lat = tally.latencies.get(op, [])
        ok = tally.statuses.get(f"{op} 200", 0)
        operations[op] = {"count": len(lat), "ok": ok, "per_s": round(len(lat) / elapsed, 2),
                          **{f"p{q}_ms": round(percentile(lat, q) * 1000, 1) for q in (50, 95, 99)}}
    total = sum(o["count"] for o in operations.values())
    errors = {k: v for k, v in tally.statuses.items() if not k.endswith(" 200")}
    accepted = len(tally.accepted)
    return {
        "benchmark": "soak", "clients": args.clients, "tenants": len(tenants), "seconds": round(elapsed, 1),
        "global_lock": bool(args.global_lock), "url": args.url or "own server", "machine": machine(),
        "throughput_per_s": round(total / elapsed, 2), "operations": operations, "errors": errors,
        "server_errors": sum(v for k, v in errors.items() if k.split()[1].startswith("5")),
        "cross_tenant_during_load": len(tally.cross_tenant), "cross_tenant_examples": tally.cross_tenant[:20],
        "adds_accepted": accepted, "adds_accepted_per_s": round(accepted / elapsed, 2),
        "backlog_at_end": backlog, "drain_s": round(drained_s, 1),
        "extracted_per_s": round(verified["tasks"].get("SUCCEEDED", 0) / (elapsed + drained_s), 2),
        "verify": verified,
        "lost_adds": accepted - verified["tasks"].get("SUCCEEDED", 0),
    }


@contextmanager
def _nullcontext(value: Target) -> Iterator[Target]:
    yield value


def format_report(r: dict[str, Any]) -> str:
    from .common import table

    rows = [(op, o["count"], o["per_s"], o["p50_ms"], o["p95_ms"], o["p99_ms"]) for op, o in r["operations"].items()]
    v = r["verify"]
    lines = [
        f"## soak: {r['clients']} clients, {r['tenants']} tenants, {r['seconds']} s"
        + (" — global lock" if r["global_lock"] else ""),
        "",
        table(["operation", "requests", "per s", "p50 ms", "p95 ms", "p99 ms"], rows),
        "",
        f"throughput {r['throughput_per_s']} requests/s; errors {r['errors'] or 'none'} ({r['server_errors']} 5xx)",
        f"adds accepted {r['adds_accepted']} ({r['adds_accepted_per_s']}/s); extracted {r['extracted_per_s']}/s "
        f"overall; backlog at the end {r['backlog_at_end']}, drained in {r['drain_s']} s",
        f"extraction lag (accepted → SUCCEEDED): p50 {v['extraction_lag_s']['p50']} s, "
        f"p95 {v['extraction_lag_s']['p95']} s, max {v['extraction_lag_s']['max']} s",
        f"verified: tasks {v['tasks']}, lost adds {r['lost_adds']}, missing messages {v['missing_messages']}, "
        f"own-tenant search found {v['found_by_own_tenant']}/{v['searched']}",
        f"cross-tenant answers: {r['cross_tenant_during_load']} during load, {v['cross_tenant_after_count']} after",
    ]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.url and args.global_lock:
        raise SystemExit("--global-lock applies to the server soak starts itself, not to --url")
    report = run(args)
    print(format_report(report))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2, default=str) + "\n")
    clean = (report["cross_tenant_during_load"] == 0 and report["verify"]["cross_tenant_after_count"] == 0
             and report["lost_adds"] == 0 and report["verify"]["missing_messages"] == 0
             and report["server_errors"] == 0
             and report["verify"]["found_by_own_tenant"] == report["verify"]["searched"]
             and (report["verify"]["searched"] > 0 or report["adds_accepted"] == 0))
    return 0 if clean else 1
