"""Working memory: threads, their context cards and summaries, and tenant and agent profiles."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Commands, UsageError, json_object, key_value, seconds, store_and_tenant
from .output import emit, next_page, table, when

if TYPE_CHECKING:
    from ..sdk import Memlane


def register(c: Commands) -> None:
    threads = c.group("threads", "create, list, get or delete threads (a run with a stable id)")
    for name, text, run in (("create", "create a thread (the same again answers it)", threads_create),
                            ("list", "a tenant's threads, newest activity first", threads_list),
                            ("get", "one thread", threads_get),
                            ("delete", "delete a thread: its messages, memories and summary", threads_delete)):
        s = c.command(name, text, run, within=threads)
        store_and_tenant(s)
        s.add_argument("--agent", help="the thread's agent (create: default __default__; list: only its threads)")
        if name != "list":
            s.add_argument("--thread", required=name != "create", help="the thread id (create: default a new one)")
        if name == "create":
            s.add_argument("--policy", choices=["recall_and_store", "recall_only", "store_only", "none"])
            s.add_argument("--metadata", type=json_object, help="JSON object kept with the thread")
        if name == "list":
            s.add_argument("--limit", type=int, default=50, help="page size")
            s.add_argument("--cursor", help="the next_cursor of the previous page")

    s = c.command("context", "a thread's context card: profiles, summary, memories, plans, recent turns", context)
    s.add_argument("store")
    s.add_argument("thread", help="the thread (run) id")
    s.add_argument("--app", required=True)
    s.add_argument("--tenant", required=True)
    s.add_argument("--agent", help="the thread's agent (default: the one it was held with)")
    s.add_argument("--query", help="what the next turn is about (default: the thread's latest user turn)")
    s.add_argument("--budget", type=int, default=1500, help="token budget of the card")
    s.add_argument("--recent", type=int, default=6, help="recent messages to include")
    s.add_argument("--sections", help="comma-separated subset of agent_profile,user_profile,summary,memories,"
                                      "plans,recent")
    s.add_argument("--recall-scope", choices=["tenant", "agent"], default="tenant",
                   help="memories and plans from the tenant's threads of every agent, or the thread's agent's only")

    summary = c.group("summary", "show a thread's rolling summary, or refresh it now")
    for name, text, run in (("get", "the summary and what it covers", summary_get),
                            ("refresh", "refresh it now (a task)", summary_refresh)):
        s = c.command(name, text, run, within=summary)
        s.add_argument("store")
        s.add_argument("thread_id", help="the thread (run) id")
        s.add_argument("--app", required=True)
        s.add_argument("--tenant", required=True)
        s.add_argument("--agent", help="default __default__")
        if name == "refresh":
            s.add_argument("--wait", action="store_true", help="wait for the task to finish")
            s.add_argument("--timeout", type=seconds, default=60.0, help="--wait: give up after this many seconds")

    profiles = c.group("profiles", "a tenant's profile, or with --agent an agent's (per tenant): get, put or delete")
    for name, text, run in (("get", "stated merged with distilled, rendered", profiles_get),
                            ("put", "replace what is stated (text, attributes)", profiles_put),
                            ("delete", "withdraw what is stated (the distilled part stays)", profiles_delete)):
        s = c.command(name, text, run, within=profiles)
        store_and_tenant(s)
        s.add_argument("--agent", help="the agent's profile (kept per tenant) instead of the tenant's")
        if name == "put":
            s.add_argument("--text", help="free text stated about the tenant (or the agent's instructions)")
            s.add_argument("--attr", dest="attributes", type=key_value, action="append", metavar="NAME=VALUE",
                           help="a stated attribute (repeat)")


def _thread(t: Any) -> str:
    return (f"{t.thread_id}: {t.message_count} messages, {t.token_count} tokens, {t.access_policy}, "
            f"agent {t.scope.agent_id}, last {when(t.last_activity)}")


def threads_create(args: argparse.Namespace, client: "Memlane") -> int:
    scope = {k: v for k, v in (("app_id", args.app), ("tenant_id", args.tenant), ("agent_id", args.agent)) if v}
    thread = client.threads.create(args.store, scope, thread_id=args.thread, access_policy=args.policy,
                                   metadata=args.metadata)
    emit(args, thread, lambda: _thread(thread))
    return 0


def threads_list(args: argparse.Namespace, client: "Memlane") -> int:
    page = client.threads.list(args.store, app_id=args.app, tenant_id=args.tenant, agent_id=args.agent,
                               limit=args.limit).page(args.cursor)
    emit(args, page, lambda: table(page.threads, [
        ("THREAD", lambda t: t.thread_id), ("AGENT", lambda t: t.scope.agent_id),
        ("MESSAGES", lambda t: t.message_count), ("TOKENS", lambda t: t.token_count),
        ("POLICY", lambda t: t.access_policy), ("LAST ACTIVITY", lambda t: when(t.last_activity))],
        empty="(no threads)") + next_page(page))
    return 0


def threads_get(args: argparse.Namespace, client: "Memlane") -> int:
    thread = client.threads.get(args.store, args.thread, app_id=args.app, tenant_id=args.tenant, agent_id=args.agent)
    emit(args, thread, lambda: _thread(thread))
    return 0


def threads_delete(args: argparse.Namespace, client: "Memlane") -> int:
    deleted = client.threads.delete(args.store, args.thread, app_id=args.app, tenant_id=args.tenant,
                                    agent_id=args.agent)
    emit(args, deleted, f"deleted thread {args.thread}: {deleted.messages} messages, {deleted.memories} memories")
    return 0


def context(args: argparse.Namespace, client: "Memlane") -> int:
    options: dict[str, Any] = {"budget_tokens": args.budget, "recent_messages": args.recent,
                               "recall_scope": args.recall_scope}
    for name, value in (("agent_id", args.agent), ("query", args.query)):
        if value is not None:
            options[name] = value
    if args.sections:
        options["sections"] = args.sections.split(",")
    card = client.threads.context(args.store, args.thread, app_id=args.app, tenant_id=args.tenant, **options)

    def human() -> str:
        tokens = card.tokens
        cut = ", ".join(f"{c.section} -{c.dropped}" + (f" ~{c.truncated}" if c.truncated else "") for c in card.cut)
        return (f"{card.text}\n\n({tokens.total}/{tokens.budget} tokens, {tokens.tokenizer}"
                + (f"; cut: {cut}" if cut else "") + ")")

    emit(args, card, human)
    return 0


def summary_get(args: argparse.Namespace, client: "Memlane") -> int:
    found = client.threads.summary(args.store, args.thread_id, app_id=args.app, tenant_id=args.tenant,
                                   agent_id=args.agent)

    def human() -> str:
        text = (f"thread {found.thread_id}: {found.covered_messages} messages covered (to {found.covered_until}), "
                f"{found.tokens} tokens ({found.tokenizer}), {found.origin}, {found.age_seconds:.0f}s old")
        text += "".join(f"\n  {s.text}" for s in found.sentences)
        text += "".join(f"\n  open: {item}" for item in found.open_items)
        return text + "".join(f"\n  decided: {item}" for item in found.decisions)

    emit(args, found, human)
    return 0


def summary_refresh(args: argparse.Namespace, client: "Memlane") -> int:
    who = {"app_id": args.app, "tenant_id": args.tenant}
    task = client.threads.refresh_summary(args.store, args.thread_id, **who, agent_id=args.agent)
    if args.wait:
        task = client.threads.wait_summary(args.store, task.request_id, **who, timeout=args.timeout)
    emit(args, task, f"summary refresh {task.request_id}: {task.status}")
    return 0


def _profile(p: Any) -> str:
    facts = [*p.attributes, *p.preferences]
    return p.text + ("\n\n" + table(facts, [("NAME", lambda f: f.name), ("ORIGIN", lambda f: f.origin),
                                            ("VALUE", lambda f: f.value)]) if facts else "")


def profiles_get(args: argparse.Namespace, client: "Memlane") -> int:
    if args.agent:
        profile = client.profiles.get_agent(args.store, args.agent, app_id=args.app, tenant_id=args.tenant)
    else:
        profile = client.profiles.get(args.store, args.tenant, app_id=args.app)
    emit(args, profile, lambda: _profile(profile))
    return 0


def profiles_put(args: argparse.Namespace, client: "Memlane") -> int:
    if args.text is None and not args.attributes:
        raise UsageError("profiles put: give --text and/or --attr NAME=VALUE (it replaces what was stated)")
    attributes = dict(args.attributes) if args.attributes else None
    if args.agent:
        profile = client.profiles.put_agent(args.store, args.agent, app_id=args.app, tenant_id=args.tenant,
                                            text=args.text, attributes=attributes)
    else:
        profile = client.profiles.put(args.store, args.tenant, app_id=args.app, text=args.text, attributes=attributes)
    emit(args, profile, lambda: _profile(profile))
    return 0


def profiles_delete(args: argparse.Namespace, client: "Memlane") -> int:
    if args.agent:
        client.profiles.delete_agent(args.store, args.agent, app_id=args.app, tenant_id=args.tenant)
        who = f"agent {args.agent} of tenant {args.tenant}"
    else:
        client.profiles.delete(args.store, args.tenant, app_id=args.app)
        who = f"tenant {args.tenant}"
    emit(args, None, f"deleted the stated profile of {who}")  # 204: the API answers no document; --json prints null
    return 0
