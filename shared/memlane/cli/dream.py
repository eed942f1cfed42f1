"""Dreams: run one over a scope, list its tasks and actions, and apply, reject or undo an action."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Commands, UsageError, seconds, store_and_tenant
from .output import emit, fields, next_page, table, when

if TYPE_CHECKING:
    from ..sdk import Memlane

KINDS = ["ADD", "UPDATE", "DELETE", "MERGE", "NOOP", "EMIT_SKILL", "EMIT_PROFILE"]


def register(c: Commands) -> None:
    dream = c.group("dream", "run a dream over a scope; its tasks and actions; apply, reject or undo an action")
    s = c.command("run", "consolidate a tenant's (or a run's) memories now", run, within=dream)
    store_and_tenant(s)
    s.add_argument("--agent")
    s.add_argument("--run")
    s.add_argument("--mode", choices=["proposal", "safe_auto"], help="default: the store's dream_mode")
    s.add_argument("--threshold", type=float, help="safe_auto: apply actions at least this confident")
    s.add_argument("--kind", dest="kinds", action="append", help="only these action kinds (repeat; e.g. MERGE)")
    s.add_argument("--sync", action="store_true", help="dream inline and print its actions")
    s.add_argument("--wait", action="store_true", help="wait for the dream task to finish")
    s.add_argument("--timeout", type=seconds, default=60.0, help="--wait: give up after this many seconds (exit 6)")

    s = c.command("tasks", "a dream task (with its id), or a tenant's dream tasks", tasks, within=dream)
    s.add_argument("store")
    s.add_argument("task_id", nargs="?")
    s.add_argument("--app")
    s.add_argument("--tenant")
    s.add_argument("--limit", type=int, help="page size")
    s.add_argument("--cursor", help="the next_cursor of the previous page")

    s = c.command("actions", "the actions a dream task proposed or applied", actions, within=dream)
    s.add_argument("store")
    s.add_argument("task_id")
    s.add_argument("--status", help="only actions in this status (pending, applied, rejected, undone, failed)")
    s.add_argument("--limit", type=int, help="page size")
    s.add_argument("--cursor", help="the next_cursor of the previous page")

    for name, text, handler in (("action", "one action: what it changes and why", action),
                                ("apply", "apply a pending action", apply),
                                ("reject", "reject a pending action", reject),
                                ("undo", "undo an applied action", undo)):
        s = c.command(name, text, handler, within=dream)
        s.add_argument("store")
        s.add_argument("action_id")


def _task(t: Any) -> str:
    return fields([("task_id", t.task_id), ("status", t.status), ("scope", "/".join(
        v for v in (t.scope.app_id, t.scope.tenant_id, t.scope.agent_id, t.scope.run_id) if v)), ("mode", t.mode),
        ("threshold", t.threshold), ("engine", t.engine), ("stats", ", ".join(f"{k} {v}" for k, v in t.stats.items())),
        ("actions", len(t.action_ids)), ("error", t.error)]) + ("\n\n" + _actions(t.actions) if t.actions else "")


def _actions(found: list[Any]) -> str:
    return table(found, [("ACTION", lambda a: a.action_id), ("KIND", lambda a: a.kind), ("STATUS", lambda a: a.status),
                         ("CONF", lambda a: f"{a.confidence:.2f}"),
                         ("RATIONALE", lambda a: a.rationale)], empty="(no actions)")


def run(args: argparse.Namespace, client: "Memlane") -> int:
    scope = {k: v for k, v in (("app_id", args.app), ("tenant_id", args.tenant), ("agent_id", args.agent),
                               ("run_id", args.run)) if v}
    task = client.dream.run(args.store, scope, mode=args.mode, threshold=args.threshold, kinds=args.kinds,
                            sync=args.sync)
    if args.wait and not args.sync:
        task = client.dream.wait(args.store, task.task_id, timeout=args.timeout)
    emit(args, task, lambda: _task(task))
    return 0


def tasks(args: argparse.Namespace, client: "Memlane") -> int:
    if args.task_id:
        task = client.dream.get(args.store, args.task_id)
        emit(args, task, lambda: _task(task))
        return 0
    if not (args.app and args.tenant):
        raise UsageError("dream tasks: listing needs --app and --tenant (or give a task id)")
    page = client.dream.list(args.store, app_id=args.app, tenant_id=args.tenant, limit=args.limit).page(args.cursor)
    emit(args, page, lambda: table(page.tasks, [
        ("TASK", lambda t: t.task_id), ("STATUS", lambda t: t.status), ("MODE", lambda t: t.mode),
        ("TRIGGER", lambda t: t.trigger), ("ACTIONS", lambda t: len(t.action_ids)),
        ("CREATED", lambda t: when(t.created_at))], empty="(no dream tasks)") + next_page(page))
    return 0


def actions(args: argparse.Namespace, client: "Memlane") -> int:
    page = client.dream.actions(args.store, args.task_id, status=args.status, limit=args.limit).page(args.cursor)
    emit(args, page, lambda: _actions(page.actions) + next_page(page))
    return 0


def _action(a: Any) -> str:
    return fields([("action_id", a.action_id), ("task_id", a.task_id), ("kind", a.kind), ("status", a.status),
                   ("confidence", f"{a.confidence:.2f}"), ("rationale", a.rationale),
                   ("targets", ", ".join(a.target_ids)), ("keep", a.keep_id), ("undoable", a.undoable)]
                  + [("before", m.text) for m in a.before] + ([("after", a.after.text)] if a.after else []))


def action(args: argparse.Namespace, client: "Memlane") -> int:
    found = client.dream.get_action(args.store, args.action_id)
    emit(args, found, lambda: _action(found))
    return 0


def apply(args: argparse.Namespace, client: "Memlane") -> int:
    done = client.dream.apply(args.store, args.action_id)
    emit(args, done, f"{done.action_id}: {done.status}")
    return 0


def reject(args: argparse.Namespace, client: "Memlane") -> int:
    done = client.dream.reject(args.store, args.action_id)
    emit(args, done, f"{done.action_id}: {done.status}")
    return 0


def undo(args: argparse.Namespace, client: "Memlane") -> int:
    done = client.dream.undo(args.store, args.action_id)
    emit(args, done, f"{done.action_id}: {done.status}")
    return 0
