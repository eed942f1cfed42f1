"""Stores, adds, imports, search, memories, messages and tasks: each command one SDK call (or two, with --wait)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .options import (Commands, UsageError, json_object, scope_of, scoped, seconds, store_and_tenant,
                      tenant_of)
from .output import cut, emit, fields, next_page, table, terminal_width, when

if TYPE_CHECKING:  # the SDK needs httpx (memlane[sdk]); importing the CLI does not
    from ..sdk import Memlane

MEMORY_TYPES = ["fact", "preference", "event", "plan", "procedure", "summary"]


def register(c: Commands) -> None:
    stores = c.group("stores", "create, list, get, update or delete stores")
    s = c.command("create", "create a store", stores_create, within=stores)
    s.add_argument("name")
    _store_settings(s)
    _page(c.command("list", "list the stores (one page; --cursor for the next)", stores_list, within=stores))
    c.command("get", "a store's settings", stores_get, within=stores).add_argument("name")
    s = c.command("update", "change a store's settings", stores_update, within=stores)
    s.add_argument("name")
    _store_settings(s)
    c.command("delete", "delete a store and everything in it", stores_delete, within=stores).add_argument("name")

    s = c.command("add", "add a conversation or a text (extraction runs in the background)", add)
    scoped(s)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--text")
    g.add_argument("--messages", help="JSON file with [{role, content, name?, created_at?}], or - for stdin")
    s.add_argument("--sync", action="store_true", help="extract inline and print the memories")
    s.add_argument("--wait", action="store_true", help="wait for the extraction task to finish")
    s.add_argument("--timeout", type=seconds, default=60.0, help="--wait: give up after this many seconds (exit 6)")
    s.add_argument("--request-id")
    s.add_argument("--metadata", type=json_object, help="JSON object kept with the add")
    s.add_argument("--policy", choices=["recall_and_store", "recall_only", "store_only", "none"],
                   help="the run's access policy")

    s = c.command("import", "add a JSONL file, one add body (with its request_id) per line; run it again to "
                            "resume: what is in is replayed, not added twice", import_)
    s.add_argument("file", help="JSONL: each line the body of POST /v1/stores/{store}/memories with a request_id")
    s.add_argument("--store", required=True)
    s.add_argument("--batch-size", type=int, default=100, choices=range(1, 101), metavar="1-100",
                   help="adds per request (POST .../memories:batch)")
    s.add_argument("--progress-every", type=int, default=1000, metavar="N",
                   help="when stderr is not a terminal, a progress line every N lines")

    s = c.command("search", "search long-term memories (and messages, summaries)", search)
    scoped(s, tenant_required=True)
    s.add_argument("query")
    s.add_argument("--top-k", type=int, default=10)
    s.add_argument("--evidence", action="store_true", help="include the source messages")
    s.add_argument("--type", dest="types", action="append", choices=["memory", "message", "summary"],
                   help="record type to search (repeat for several; default memory)")
    s.add_argument("--min-similarity", type=float)
    g = s.add_mutually_exclusive_group()
    g.add_argument("--exact-thread", dest="thread", action="store_const", const=True, help="only the --run thread")
    g.add_argument("--other-threads", dest="thread", action="store_const", const=False,
                   help="the --run thread and the tenant's other threads (if its access policy recalls)")

    memories = c.group("memories", "list, get, write, update or delete long-term memories")
    s = c.command("list", "a tenant's memories (one page; --cursor for the next)", memories_list, within=memories)
    scoped(s, tenant_required=True)
    _page(s)
    for name, text, run in (("get", "one memory", memories_get), ("delete", "delete a memory (a hard delete)",
                                                                   memories_delete)):
        s = c.command(name, text, run, within=memories)
        store_and_tenant(s)
        s.add_argument("memory_id")
    s = c.command("update", "change a memory's text, type, importance or metadata", memories_update, within=memories)
    store_and_tenant(s)
    s.add_argument("memory_id")
    s.add_argument("--text")
    s.add_argument("--type", choices=MEMORY_TYPES)
    s.add_argument("--importance", type=float)
    s.add_argument("--metadata", type=json_object, help="JSON object (replaces the memory's)")
    s = c.command("write", "write memories as given: no extraction, no consolidation (infer: false)",
                  memories_write, within=memories)
    scoped(s)
    s.add_argument("--text", action="append", required=True, help="a memory's text (repeat for several)")
    s.add_argument("--id", dest="ids", action="append", help="the memory_id of the --text at the same position")
    s.add_argument("--type", choices=MEMORY_TYPES, help="the memory type of every --text")
    s.add_argument("--request-id")

    s = c.command("messages", "read a run's messages (short-term memory)", messages)
    scoped(s, tenant_required=True)
    s.add_argument("--newest-first", action="store_true")
    _page(s)

    s = c.command("tasks", "show a task (with its request id), or list a tenant's tasks", tasks)
    s.add_argument("store")
    s.add_argument("request_id", nargs="?")
    s.add_argument("--app")
    s.add_argument("--tenant")
    s.add_argument("--retry", action="store_true", help="run the FAILED task of REQUEST_ID again (then --wait on it)")
    s.add_argument("--wait", action="store_true", help="wait for the task to finish")
    s.add_argument("--timeout", type=seconds, default=60.0, help="--wait: give up after this many seconds (exit 6)")
    _page(s)


def _store_settings(s: argparse.ArgumentParser) -> None:
    s.add_argument("--description")
    s.add_argument("--instructions", dest="extract_instructions", help="extraction instructions for the store")
    s.add_argument("--dream-mode", choices=["proposal", "safe_auto"])
    s.add_argument("--dream-threshold", type=float)
    s.add_argument("--extract-role", dest="extract_roles", action="append",
                   choices=["user", "assistant_confirmed", "assistant"], help="whose turns are extracted (repeat)")
    s.add_argument("--keywords-from-assistant", action=argparse.BooleanOptionalAction, default=None)
    s.add_argument("--summary-trigger-tokens", type=int, help="refresh a thread's summary past this many new tokens")
    s.add_argument("--summary-keep-recent", type=int, help="recent messages a thread summary leaves out")


STORE_SETTINGS = ("description", "extract_instructions", "dream_mode", "dream_threshold", "extract_roles",
                  "keywords_from_assistant", "summary_trigger_tokens", "summary_keep_recent")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in STORE_SETTINGS if getattr(args, name) is not None}


def _page(s: argparse.ArgumentParser) -> None:
    s.add_argument("--limit", type=int, help="page size")
    s.add_argument("--cursor", help="the next_cursor of the previous page")


def _store_rows(stores: list[Any]) -> str:
    return table(stores, [("NAME", lambda s: s.name), ("EMBEDDER", lambda s: f"{s.embedding_model}/{s.embedding_dim}"),
                          ("DREAM", lambda s: s.dream_mode), ("CREATED", lambda s: when(s.created_at)),
                          ("DESCRIPTION", lambda s: s.description)], empty="(no stores)")


def stores_create(args: argparse.Namespace, client: "Memlane") -> int:
    store = client.stores.create(args.name, **_settings(args))
    emit(args, store, f"created store {store.name} (embedder {store.embedding_model})")
    return 0


def stores_list(args: argparse.Namespace, client: "Memlane") -> int:
    page = client.stores.list(limit=args.limit).page(args.cursor)
    emit(args, page, lambda: _store_rows(page.stores) + next_page(page))
    return 0


def _store(store: Any) -> str:
    return fields([(name, getattr(store, name, None)) for name in (
        "name", "description", "embedding_model", "embedding_dim", "dream_mode", "dream_threshold", "extract_roles",
        "keywords_from_assistant", "summary_trigger_tokens", "summary_keep_recent", "created_at")]
        + [("extract_instructions", store.extract_instructions)])


def stores_get(args: argparse.Namespace, client: "Memlane") -> int:
    store = client.stores.get(args.name)
    emit(args, store, lambda: _store(store))
    return 0


def stores_update(args: argparse.Namespace, client: "Memlane") -> int:
    settings = _settings(args)
    if not settings:
        raise UsageError("stores update: give a setting to change (--description, --dream-mode, ...)")
    store = client.stores.update(args.name, **settings)
    emit(args, store, lambda: _store(store))
    return 0


def stores_delete(args: argparse.Namespace, client: "Memlane") -> int:
    client.stores.delete(args.name)  # 204: the API answers no document; --json prints null
    emit(args, None, f"deleted store {args.name}")
    return 0


def _task(task: Any) -> str:
    human = f"request {task.request_id}: {task.status}" + (f" ({task.error})" if getattr(task, "error", None) else "")
    for memory in getattr(task, "memories", None) or []:
        line = f"  + [{memory.memory_type}] "
        human += "\n" + line + cut(memory.text, max(terminal_width() - len(line), 20))
    return human


def add(args: argparse.Namespace, client: "Memlane") -> int:
    options: dict[str, Any] = {"request_id": args.request_id, "metadata": args.metadata, "access_policy": args.policy}
    options = {k: v for k, v in options.items() if v is not None}
    if args.messages:
        try:
            source = sys.stdin.read() if args.messages == "-" else Path(args.messages).read_text()
            messages = json.loads(source)
        except (OSError, ValueError) as unreadable:
            raise UsageError(f"--messages {args.messages}: {unreadable}") from unreadable
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise UsageError(f"--messages {args.messages}: a JSON list of messages is expected, each an object "
                             '({"role": ..., "content": ...})')  # not a traceback (a trial)
        result = client.add(args.store, scope_of(args), messages=messages, sync=args.sync, **options)
    else:
        result = client.add(args.store, scope_of(args), text=args.text, sync=args.sync, **options)
    if args.wait and not args.sync:
        result = client.tasks.wait(args.store, result.request_id, **tenant_of(args), timeout=args.timeout)
    emit(args, result, lambda: _task(result))
    return 0


def import_(args: argparse.Namespace, client: "Memlane") -> int:
    """One add per line of a JSONL file, in batches. Exit 0: every line is in (accepted or replayed); 1: some
    line was refused or kept failing (listed; fix them and run it again: what is in is replayed, not re-added)."""
    from ..importer import ImportAborted, ImportReport, import_file
    from ..sdk import ApiError, ConnectionFailed

    terminal = sys.stderr.isatty()
    shown = [0]

    def progress(report: ImportReport) -> None:
        line = f"{report.lines} lines: {report.accepted} accepted, {report.replayed} replayed, {report.refused} refused"
        if terminal:  # a live line on a terminal; a log file gets whole lines only
            print(f"\r{line}", end="", file=sys.stderr, flush=True)
        elif report.lines // args.progress_every > shown[0]:
            shown[0] = report.lines // args.progress_every
            print(f"progress: {shown[0] * args.progress_every} lines", file=sys.stderr, flush=True)

    def send(method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        """Once, no retry: the importer reads a refused batch's code and decides itself what to send again."""
        try:
            return 200, client.request(method, path, json=body)
        except ConnectionFailed:
            raise
        except ApiError as error:
            return error.status, {"error": {"code": error.code, "message": error.message}}

    try:
        report = import_file(send, args.store, Path(args.file), batch_size=args.batch_size, progress=progress)
    except ImportAborted as aborted:
        if terminal:
            print(file=sys.stderr)
        raise ApiError(aborted.status, aborted.code, aborted.message) from aborted
    except (OSError, UnicodeDecodeError) as unreadable:  # no file, a directory, not UTF-8: no traceback (a trial)
        raise UsageError(f"{args.file} cannot be read as lines of UTF-8 text: {unreadable}; lines before the one it "
                         "stopped at were sent (a run again replays them)") from None
    if terminal:
        print(file=sys.stderr)
    summary = {"file": args.file, "store": args.store, "lines": report.lines, "accepted": report.accepted,
               "replayed": report.replayed, "refused": report.refused, "failed": report.failed,
               "refusals": [vars(r) for r in report.refusals]}
    human = (f"imported {args.file} into {args.store}: {report.lines} lines: {report.accepted} accepted, "
             f"{report.replayed} replayed, {report.refused} refused" + (f", {report.failed} failed" if report.failed else "")
             + "".join(f"\n  line {r.line}: {r.code}: {r.message}" for r in report.refusals))
    emit(args, summary, human)
    return 0 if report.complete else 1


def _hits(results: list[Any]) -> str:
    lines = []
    for i, r in enumerate(results, 1):
        if (r.record_type or "memory") == "message":
            label = f"[message] {r.name or r.role}:"
        else:
            label = f"[{r.memory_type or r.record_type}]"
        # One line each, cut to the width: a text's own line breaks must not print what reads as another result
        # (a trial: a memory's "\n 2. 0.99  [fact] FORGED" did), nor a 32,000-character line.
        head = f"{i:>2}. {r.similarity:.2f}  {label} "
        lines.append(head + cut(r.text, max(terminal_width() - len(head), 20)))
        for e in r.evidence or []:
            lines.append(f"      ← {e.name or e.role}: {cut(e.content, 100)}")
    return "\n".join(lines) or "(no results)"


def search(args: argparse.Namespace, client: "Memlane") -> int:
    options: dict[str, Any] = {"top_k": args.top_k, "include_evidence": args.evidence}
    for name, value in (("record_types", args.types), ("exact_thread_match", args.thread),
                        ("min_similarity", args.min_similarity)):
        if value is not None:
            options[name] = value
    found = client.memories.search(args.store, args.query, scope_of(args), **options)
    emit(args, found, lambda: _hits(found.results))
    return 0


def _memories(memories: list[Any]) -> str:
    return table(memories, [("ID", lambda m: m.memory_id), ("TYPE", lambda m: m.memory_type),
                            ("STATUS", lambda m: m.status), ("RUN", lambda m: m.scope.run_id),
                            ("UPDATED", lambda m: when(m.updated_at)), ("TEXT", lambda m: m.text)],
                 empty="(no memories)")


def _memory(m: Any) -> str:
    return fields([("memory_id", m.memory_id), ("text", m.text), ("type", m.memory_type), ("origin", m.origin),
                   ("status", m.status), ("scope", "/".join(str(v) for v in m.scope.model_dump().values() if v)),
                   ("importance", m.importance), ("event_time", m.event_time), ("created_at", m.created_at),
                   ("updated_at", m.updated_at), ("evidence", ", ".join(m.evidence_ids)),
                   ("supersedes", m.supersedes), ("superseded_by", m.superseded_by),
                   ("metadata", json.dumps(m.metadata) if m.metadata else None)])


def memories_list(args: argparse.Namespace, client: "Memlane") -> int:
    page = client.memories.list(args.store, scope_of(args), limit=args.limit).page(args.cursor)
    emit(args, page, lambda: _memories(page.memories) + next_page(page))
    return 0


def memories_get(args: argparse.Namespace, client: "Memlane") -> int:
    memory = client.memories.get(args.store, args.memory_id, app_id=args.app, tenant_id=args.tenant)
    emit(args, memory, lambda: _memory(memory))
    return 0


def memories_update(args: argparse.Namespace, client: "Memlane") -> int:
    changes = {k: v for k, v in (("text", args.text), ("memory_type", args.type), ("importance", args.importance),
                                 ("metadata", args.metadata)) if v is not None}
    if not changes:
        raise UsageError("memories update: give --text, --type, --importance or --metadata")
    memory = client.memories.update(args.store, args.memory_id, app_id=args.app, tenant_id=args.tenant, **changes)
    emit(args, memory, lambda: _memory(memory))
    return 0


def memories_delete(args: argparse.Namespace, client: "Memlane") -> int:
    receipt = client.memories.delete(args.store, args.memory_id, app_id=args.app, tenant_id=args.tenant)
    emit(args, receipt, f"deleted memory {receipt.memory_id} ({receipt.deleted_at})")
    return 0


def memories_write(args: argparse.Namespace, client: "Memlane") -> int:
    ids = args.ids or []
    if len(ids) > len(args.text):
        raise UsageError("memories write: more --id than --text")
    items = [{"text": text, **({"memory_id": ids[i]} if i < len(ids) else {}),
              **({"memory_type": args.type} if args.type else {})} for i, text in enumerate(args.text)]
    written = client.memories.write(args.store, scope_of(args), items, request_id=args.request_id)
    emit(args, written, lambda: f"{written.created} created\n"
                                + _memories(written.memories))
    return 0


def messages(args: argparse.Namespace, client: "Memlane") -> int:
    pager = client.messages.list(args.store, scope_of(args), newest_first=args.newest_first or None, limit=args.limit)
    page = pager.page(args.cursor)
    emit(args, page, lambda: table(page.messages, [
        ("TIME", lambda m: when(m.created_at)), ("FROM", lambda m: m.name or m.role), ("CONTENT", lambda m: m.content)],
        empty="(no messages)") + next_page(page))
    return 0


def tasks(args: argparse.Namespace, client: "Memlane") -> int:
    if args.retry and not args.request_id:
        raise UsageError("tasks --retry: give the request id of the failed task")
    if args.request_id:
        if args.retry:  # the retry's answer (the task PENDING), or with --wait the task it came to
            task = client.tasks.retry(args.store, args.request_id, **tenant_of(args))
        if args.wait:
            task = client.tasks.wait(args.store, args.request_id, **tenant_of(args), timeout=args.timeout)
        elif not args.retry:
            task = client.tasks.get(args.store, args.request_id, **tenant_of(args))
        emit(args, task, lambda: _task(task) + "".join(f"\n  {o.action:<6} {o.text}" for o in task.outcomes))
        return 0
    if not (args.app and args.tenant):
        raise UsageError("tasks: listing a tenant's tasks needs --app and --tenant (or give a request id)")
    page = client.tasks.list(args.store, app_id=args.app, tenant_id=args.tenant, limit=args.limit).page(args.cursor)
    emit(args, page, lambda: table(page.tasks, [
        ("REQUEST", lambda t: t.request_id), ("STATUS", lambda t: t.status), ("CREATED", lambda t: when(t.created_at)),
        ("MEMORIES", lambda t: len(t.outcomes))], empty="(no tasks)") + next_page(page))
    return 0
