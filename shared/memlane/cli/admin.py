"""Scopes and their access policies, run deletion, tenant erasure and the audit log."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..domain.scope import DEFAULT
from .options import Commands, scope_of, seconds, store_and_tenant
from .output import emit, fields, next_page, table, when

if TYPE_CHECKING:
    from ..sdk import Memlane

POLICIES = ["recall_and_store", "recall_only", "store_only", "none"]


# A run is a thread: without --agent, the agent whose thread the run is (the default agent then set the policy of,
# or deleted, another run than the one named, and said it had: a new user's trial).
_AGENT_HELP = "the run's agent (default: the agent whose thread the run is)"


def register(c: Commands) -> None:
    s = c.command("scopes", "a tenant's runs: agent, run, access policy, messages, activity", scopes)
    store_and_tenant(s)
    s.add_argument("--limit", type=int, help="page size")
    s.add_argument("--cursor", help="the next_cursor of the previous page")

    policy = c.group("access-policy", "show or set a run's access policy")
    for name, text, run in (("get", "a run's access policy", access_policy_get),
                            ("put", "set a run's access policy", access_policy_put)):
        s = c.command(name, text, run, within=policy)
        store_and_tenant(s)
        s.add_argument("--agent", help=_AGENT_HELP)
        s.add_argument("--run", required=True)
        if name == "put":
            s.add_argument("policy", choices=POLICIES)

    runs = c.group("runs", "delete a run: its messages, memories, summary and task texts")
    s = c.command("delete", "delete a run and everything derived from it", runs_delete, within=runs)
    s.add_argument("store")
    s.add_argument("run_id")
    s.add_argument("--app", required=True)
    s.add_argument("--tenant", required=True)
    s.add_argument("--agent", help=_AGENT_HELP)

    erase = c.group("erase", "erase a tenant in every store, or show an erasure")
    s = c.command("tenant", "erase every item of a tenant in every store (asynchronous)", erase_tenant, within=erase)
    s.add_argument("--app", required=True)
    s.add_argument("--tenant", required=True)
    _wait(s)
    s = c.command("status", "an erasure's status and counts", erase_status, within=erase)
    s.add_argument("erasure_id")
    _wait(s)

    s = c.command("audit", "a store's audit log, newest first (admin)", audit)
    s.add_argument("store")
    s.add_argument("--since", help="ISO date-time")
    s.add_argument("--until", help="ISO date-time")
    s.add_argument("--principal")
    s.add_argument("--status", type=int, help="HTTP status (0: a change the server stopped during, never answered)")
    s.add_argument("--operation", help='e.g. "POST /v1/stores/<store>/search"')
    s.add_argument("--tenant")
    s.add_argument("--limit", type=int, help="page size")
    s.add_argument("--cursor", help="the next_cursor of the previous page")


def _wait(s: argparse.ArgumentParser) -> None:
    s.add_argument("--wait", action="store_true", help="wait until it finished")
    s.add_argument("--timeout", type=seconds, default=60.0, help="--wait: give up after this many seconds (exit 6)")


def _scopes(found: list[Any]) -> str:
    return table(found, [("AGENT", lambda s: s.scope.agent_id), ("RUN", lambda s: s.scope.run_id),
                         ("POLICY", lambda s: s.access_policy), ("MESSAGES", lambda s: s.message_count),
                         ("LAST ACTIVITY", lambda s: when(s.last_activity))], empty="(no scopes)")


def scopes(args: argparse.Namespace, client: "Memlane") -> int:
    page = client.scopes.list(args.store, app_id=args.app, tenant_id=args.tenant, limit=args.limit).page(args.cursor)
    emit(args, page, lambda: _scopes(page.scopes) + next_page(page))
    return 0


def access_policy_get(args: argparse.Namespace, client: "Memlane") -> int:
    """A run is a thread: its record carries the policy (404 thread_not_found for a run never written)."""
    run = client.threads.get(args.store, args.run, app_id=args.app, tenant_id=args.tenant, agent_id=args.agent)
    emit(args, run, str(getattr(run.access_policy, "value", run.access_policy)))
    return 0


def access_policy_put(args: argparse.Namespace, client: "Memlane") -> int:
    if args.agent is None:  # the route names all four ids: the thread's own agent, or the default for a new run
        from ..sdk.errors import ThreadNotFound  # the sdk extra: only a client command needs it

        try:
            args.agent = client.threads.get(args.store, args.run, app_id=args.app, tenant_id=args.tenant).scope.agent_id
        except ThreadNotFound:
            args.agent = DEFAULT
    info = client.scopes.set_access_policy(args.store, scope_of(args), args.policy)
    emit(args, info, f"{info.scope.agent_id}/{info.scope.run_id}: {args.policy}")
    return 0


def runs_delete(args: argparse.Namespace, client: "Memlane") -> int:
    deleted = client.runs.delete(args.store, args.run_id, app_id=args.app, tenant_id=args.tenant, agent_id=args.agent)
    emit(args, deleted, f"deleted run {args.run_id}: {deleted.messages} messages, {deleted.memories} memories, "
                        f"{deleted.summaries} summaries")
    return 0


def _erasure(e: Any) -> str:
    counts = "; ".join(f"{store}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items())
                       for store, kinds in e.deleted.items())
    return fields([("erasure_id", e.erasure_id), ("tenant", f"{e.app_id}/{e.tenant_id}"), ("status", e.status),
                   ("deleted", f"{e.deleted_items} items, {e.deleted_documents} documents"), ("per store", counts),
                   ("updated_at", e.updated_at), ("error", e.error)])


def erase_tenant(args: argparse.Namespace, client: "Memlane") -> int:
    erasure = client.erasures.erase(app_id=args.app, tenant_id=args.tenant)
    if args.wait:
        erasure = client.erasures.wait(erasure.erasure_id, timeout=args.timeout)
    emit(args, erasure, lambda: _erasure(erasure))
    return 0


def erase_status(args: argparse.Namespace, client: "Memlane") -> int:
    erasure = (client.erasures.wait(args.erasure_id, timeout=args.timeout) if args.wait
               else client.erasures.get(args.erasure_id))
    emit(args, erasure, lambda: _erasure(erasure))
    return 0


def audit(args: argparse.Namespace, client: "Memlane") -> int:
    pager = client.audit.list(args.store, since=args.since, until=args.until, principal=args.principal,
                              status=args.status, operation=args.operation, tenant_id=args.tenant, limit=args.limit)
    page = pager.page(args.cursor)
    emit(args, page, lambda: table(page.requests, [
        ("TIME", lambda r: when(r.at)), ("OPERATION", lambda r: r.operation), ("STATUS", lambda r: r.status),
        ("MS", lambda r: f"{r.latency_ms:.0f}"), ("TENANT", lambda r: r.tenant_id),
        ("PRINCIPAL", lambda r: r.principal)], empty="(no requests)") + next_page(page))
    return 0
