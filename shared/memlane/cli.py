"""The `memlane` command: run the local service, and talk to one (or run in-process with --local)."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the client needs httpx (memlane[sdk]); `serve` and the operator commands do not
    import httpx

    from .client import MemlaneClient

DEFAULT_URL = "http://127.0.0.1:8420"
EXIT_MISSING_EXTRA = 5  # what the command needs is not there: an optional extra (named), AWS credentials, a region


class InProcessTransport:
    """An httpx transport (duck-typed, so that importing the CLI needs no httpx) that runs requests through
    the same resolver as the server, on the local adapters, without HTTP. Jobs are processed before each
    answer returns, so `add` then `search` works in one go."""

    def __init__(self, data_dir: Path):
        from .api.app import build_api
        from .bootstrap import build_local
        from .config import Settings

        self.service = build_local(Settings.from_env(data_dir=data_dir))
        self.app = build_api(self.service.deps)

    def handle_request(self, request: "httpx.Request") -> "httpx.Response":
        import httpx

        from .server import _LambdaContext, http_event

        path = request.url.raw_path.decode()
        event = http_event(request.method, path, {"content-type": "application/json"}, request.read(), "127.0.0.1")
        result = self.app.resolve(event, _LambdaContext())
        self.service.drain()
        return httpx.Response(result["statusCode"], headers=result.get("headers") or {},
                              content=(result.get("body") or "").encode())

    def close(self) -> None:
        pass


def _scope(args: argparse.Namespace) -> dict[str, Any]:
    scope = {"app_id": args.app, "tenant_id": args.tenant, "agent_id": args.agent, "run_id": args.run}
    return {k: v for k, v in scope.items() if v is not None}


def _print(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


def cmd_serve(args: argparse.Namespace) -> int:
    from .config import Settings
    from .server import serve

    logging.basicConfig(level=os.environ.get("MEMLANE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    serve(Settings.from_env(data_dir=args.data_dir, port=args.port, host=args.host))
    return 0


def cmd_stores(args: argparse.Namespace, client: MemlaneClient) -> int:
    if args.action == "create":
        settings = {k: v for k, v in (("summary_trigger_tokens", args.summary_trigger_tokens),
                                      ("summary_keep_recent", args.summary_keep_recent)) if v is not None}
        store = client.create_store(args.name, extract_instructions=args.instructions or "", **settings)
        _print(args, store, f"created store {store['name']} (embedder {store['embedding_model']})")
    else:
        stores = client.list_stores()
        _print(args, stores, "\n".join(s["name"] for s in stores) or "(no stores)")
    return 0


def cmd_add(args: argparse.Namespace, client: MemlaneClient) -> int:
    options: dict[str, Any] = {"sync": args.sync}
    if args.request_id:
        options["request_id"] = args.request_id
    if args.messages:
        messages = json.loads(Path(args.messages).read_text() if args.messages != "-" else sys.stdin.read())
        result = client.add(args.store, _scope(args), messages=messages, **options)
    else:
        result = client.add(args.store, _scope(args), text=args.text, **options)
    if args.wait and not args.sync:
        result = client.wait_task(args.store, result["request_id"], **_tenant(args))
    human = f"request {result['request_id']}: {result['status']}"
    for memory in result.get("memories", []):
        human += f"\n  + [{memory['memory_type']}] {memory['text']}"
    _print(args, result, human)
    return 0


def cmd_search(args: argparse.Namespace, client: MemlaneClient) -> int:
    options: dict[str, Any] = {"top_k": args.top_k, "include_evidence": args.evidence}
    if args.types:
        options["record_types"] = args.types
    if args.thread is not None:
        options["exact_thread_match"] = args.thread
    results = client.search(args.store, args.query, _scope(args), **options)
    lines = []
    for i, r in enumerate(results, 1):
        if r.get("record_type", "memory") == "message":
            label = f"[message] {r.get('name') or r.get('role')}:"
        else:
            label = f"[{r.get('memory_type') or r.get('record_type')}]"
        lines.append(f"{i:>2}. {r['similarity']:.2f}  {label} {r['text']}")
        for e in r.get("evidence") or []:
            lines.append(f"      ← {e.get('name') or e['role']}: {e['content'][:100]}")
    _print(args, results, "\n".join(lines) or "(no results)")
    return 0


def cmd_import(args: argparse.Namespace, client: MemlaneClient) -> int:
    """One add per line of a JSONL file, in batches. Exit 0: every line is in (accepted or replayed); 1: some
    line was refused or kept failing (listed; fix them and run it again: what is in is replayed, not re-added)."""
    from .importer import ImportAborted, ImportReport, import_file

    terminal = sys.stderr.isatty()
    shown = [0]

    def progress(report: ImportReport) -> None:
        line = f"{report.lines} lines: {report.accepted} accepted, {report.replayed} replayed, {report.refused} refused"
        if terminal:  # a live line on a terminal; a log file gets whole lines only
            print(f"\r{line}", end="", file=sys.stderr, flush=True)
        elif report.lines // args.progress_every > shown[0]:
            shown[0] = report.lines // args.progress_every
            print(f"progress: {shown[0] * args.progress_every} lines", file=sys.stderr, flush=True)

    try:
        report = import_file(client.send, args.store, Path(args.file), batch_size=args.batch_size,
                             progress=progress)
    except ImportAborted as aborted:
        print(f"\nerror: {aborted}" if terminal else f"error: {aborted}", file=sys.stderr)
        return 2
    if terminal:
        print(file=sys.stderr)
    summary = {"file": args.file, "store": args.store, "lines": report.lines, "accepted": report.accepted,
               "replayed": report.replayed, "refused": report.refused, "failed": report.failed,
               "refusals": [vars(r) for r in report.refusals]}
    human = (f"imported {args.file} into {args.store}: {report.lines} lines: {report.accepted} accepted, "
             f"{report.replayed} replayed, {report.refused} refused" + (f", {report.failed} failed" if report.failed else "")
             + "".join(f"\n  line {r.line}: {r.code}: {r.message}" for r in report.refusals))
    _print(args, summary, human)
    return 0 if report.complete else 1


def _tenant(args: argparse.Namespace) -> dict[str, str]:
    """The tenant a request id belongs to, when the command names it (request ids are per tenant)."""
    return {"app_id": args.app, "tenant_id": args.tenant} if args.app and args.tenant else {}


def cmd_tasks(args: argparse.Namespace, client: MemlaneClient) -> int:
    if args.request_id:
        task = (client.wait_task if args.wait else client.get_task)(args.store, args.request_id, **_tenant(args))
        human = f"{task['request_id']}: {task['status']}" + (f" ({task['error']})" if task.get("error") else "")
        human += "".join(f"\n  {o['action']:<6} {o['text']}" for o in task["outcomes"])
        _print(args, task, human)
    else:
        page = client.list_tasks(args.store, args.app, args.tenant)
        _print(args, page, "\n".join(f"{t['request_id']}  {t['status']:<9} {t['created_at']}"
                                     for t in page["tasks"]) or "(no tasks)")
    return 0


def cmd_messages(args: argparse.Namespace, client: MemlaneClient) -> int:
    page = client.messages(args.store, _scope(args), limit=args.limit)
    _print(args, page, "\n".join(f"{m['created_at']}  {m.get('name') or m['role']}: {m['content']}"
                                 for m in page["messages"]) or "(no messages)")
    return 0


def cmd_context(args: argparse.Namespace, client: MemlaneClient) -> int:
    options: dict[str, Any] = {"budget_tokens": args.budget, "recent_messages": args.recent}
    for name, value in (("agent_id", args.agent), ("query", args.query)):
        if value is not None:
            options[name] = value
    if args.sections:
        options["sections"] = args.sections.split(",")
    card = client.context(args.store, args.thread, app_id=args.app, tenant_id=args.tenant, **options)
    tokens = card["tokens"]
    cut = ", ".join(f"{c['section']} -{c['dropped']}" + (f" ~{c['truncated']}" if c["truncated"] else "")
                    for c in card["cut"])
    _print(args, card, f"{card['text']}\n\n({tokens['total']}/{tokens['budget']} tokens, {tokens['tokenizer']}"
                       + (f"; cut: {cut}" if cut else "") + ")")
    return 0


def cmd_threads(args: argparse.Namespace, client: MemlaneClient) -> int:
    tenant = {"app_id": args.app, "tenant_id": args.tenant}
    if args.action == "create":
        options: dict[str, Any] = {"metadata": json.loads(args.metadata)} if args.metadata else {}
        if args.policy:
            options["access_policy"] = args.policy
        thread = client.create_thread(args.store, {**tenant, "agent_id": args.agent}, thread_id=args.thread, **options)
        _print(args, thread, f"thread {thread['thread_id']} (agent {thread['scope']['agent_id']})")
    elif args.action == "list":
        page = client.list_threads(args.store, **tenant, agent_id=args.agent, limit=args.limit)
        _print(args, page, "\n".join(f"{t['thread_id']}  {t['scope']['agent_id']}  {t['message_count']} messages, "
                                     f"{t['token_count']} tokens, last {t['last_activity']}"
                                     for t in page["threads"]) or "(no threads)")
    elif not args.thread:
        print(f"error: threads {args.action} needs --thread", file=sys.stderr)
        return 2
    elif args.action == "get":
        thread = client.get_thread(args.store, args.thread, **tenant, agent_id=args.agent)
        _print(args, thread, f"{thread['thread_id']}: {thread['message_count']} messages, {thread['token_count']} "
                             f"tokens, {thread['access_policy']}, last {thread['last_activity']}")
    else:
        deleted = client.delete_thread(args.store, args.thread, **tenant, agent_id=args.agent)
        _print(args, deleted, f"deleted thread {args.thread}: {deleted['messages']} messages, "
                              f"{deleted['memories']} memories")


def cmd_summary(args: argparse.Namespace, client: MemlaneClient) -> int:
    who = {"app_id": args.app, "tenant_id": args.tenant, "agent_id": args.agent}
    if args.action == "refresh":
        task = client.refresh_summary(args.store, args.thread_id, wait=args.wait, **who)
        _print(args, task, f"summary refresh {task['request_id']}: {task['status']}")
        return 0
    found = client.get_summary(args.store, args.thread_id, **who)
    human = (f"thread {found['thread_id']}: {found['covered_messages']} messages covered (to {found['covered_until']}),"
             f" {found['tokens']} tokens ({found['tokenizer']}), {found['origin']}, {found['age_seconds']:.0f}s old")
    human += "".join(f"\n  {s['text']}" for s in found["sentences"])
    human += "".join(f"\n  open: {item}" for item in found["open_items"])
    human += "".join(f"\n  decided: {item}" for item in found["decisions"])
    _print(args, found, human)
    return 0


def cmd_access(args: argparse.Namespace) -> int:
    """Grants and API keys are written straight to the configured table (the data dir locally; the
    deployed DynamoDB table with MEMLANE_MODE=aws). Only the table is built: no index, queue or model."""
    from .bootstrap import build_operator
    from .config import Settings
    from .services import access

    apps = {app: args.tenant or ["*"] for app in args.app or []}
    if not apps and not args.admin:
        print("error: give --app (with optional --tenant) or --admin", file=sys.stderr)
        return 2
    deps = build_operator(Settings.from_env(data_dir=args.data_dir))
    if args.command == "keys":
        key = access.create_api_key(deps, args.principal, apps, admin=args.admin)
        _print(args, {"principal": args.principal, "api_key": key, "apps": apps, "admin": args.admin},
               f"API key for {args.principal} (shown once, keep it secret):\n{key}\n"
               "restart `memlane serve` to enforce keys if it was running without any")
    else:
        grant = access.grant(deps, args.principal, apps, admin=args.admin)
        _print(args, grant.model_dump(mode="json"), f"granted {args.principal}: {apps}{' (admin)' if args.admin else ''}")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild a store's index from the table, on the adapters the environment configures."""
    from .bootstrap import build
    from .config import Settings
    from .domain.errors import MemlaneError
    from .services.reindex import reindex

    deps = build(Settings.from_env(data_dir=args.data_dir))
    try:
        report = reindex(deps, args.store, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except MemlaneError as error:
        print(f"error: {error.code}: {error.message}", file=sys.stderr)
        return 2
    _print(args, vars(report), f"reindexed {report.store}: {report.indexed} memories of {report.tenants} tenants")
    return 0


def cmd_fsck(args: argparse.Namespace) -> int:
    """Compare a store's index with its table; repair the drift with --repair. Exit 1: drift left."""
    from .bootstrap import build
    from .config import Settings
    from .domain.errors import MemlaneError
    from .services.fsck import fsck

    deps = build(Settings.from_env(data_dir=args.data_dir))
    try:
        report = fsck(deps, args.store, repair=args.repair,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
    except MemlaneError as error:
        print(f"error: {error.code}: {error.message}", file=sys.stderr)
        return 2
    drift = report.missing + report.orphans + report.stale
    _print(args, vars(report), f"{report.store}: {report.memories} memories, {report.documents} documents; "
                               f"{report.missing} missing, {report.orphans} orphans, {report.stale} stale"
                               + (f"; repaired {report.repaired}" if args.repair else ""))
    return 0 if drift == 0 or args.repair else 1


def cmd_schema(args: argparse.Namespace) -> int:
    """Apply a schema policy now to the table and index the environment configures (services/schema.py).
    Exit 0: as expected (after creating or rebuilding); 1: differences left, each printed."""
    from . import bootstrap
    from .config import Settings
    from .domain.schema import SchemaMismatch
    from .services import schema

    settings = Settings.from_env(data_dir=args.data_dir, schema_policy=args.action)
    embedder = None if args.action == "recreate" else _NoEmbedder()  # only a rebuild embeds
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    service = None
    try:
        if settings.mode == "local":
            bootstrap.check_local_files(settings)  # validate: the files as they are, before opening them
            service = bootstrap.build_local(settings, embedder=embedder, check_schema=False)
            deps = service.deps
        else:
            deps = bootstrap.build(settings, embedder=embedder, check_schema=False)
        report = schema.check(deps, args.action, rebuild=args.action == "recreate", progress=say)
    except SchemaMismatch as mismatch:
        _print(args, {"policy": args.action, "ok": False, "differences": [str(d) for d in mismatch.differences]},
               "\n".join(str(d) for d in mismatch.differences))
        return 1
    except bootstrap.DataDirInUse as busy:
        print(f"error: {busy}", file=sys.stderr)
        return 4
    finally:
        if service is not None:
            service.close()
    lines = [f"created {made}" for made in report.created] + [f"rebuilt {store}" for store in report.rebuilt]
    _print(args, {"policy": args.action, "ok": True, **vars(report)},
           "\n".join(lines + [f"schema ok ({args.action})"]))
    return 0


class _NoEmbedder:
    """Schema checks touch no vectors; this keeps them from loading a model."""

    name, dim = "none", 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("schema validate/create do not embed")


def _global_options(p: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every command takes. The top parser holds the defaults; each sub-command's copy has none
    (SUPPRESS), so an option given after the sub-command overrides one given before, and nothing else does."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    p.add_argument("--url", default=default(os.environ.get("MEMLANE_URL", DEFAULT_URL)), help="server URL")
    p.add_argument("--api-key", default=default(os.environ.get("MEMLANE_API_KEY")),
                   help="API key (or MEMLANE_API_KEY)")
    p.add_argument("--sigv4", action="store_true",
                   default=default(os.environ.get("MEMLANE_SIGV4", "").lower() in ("1", "true", "yes")),
                   help="sign requests with SigV4 for the API deployed on AWS (or MEMLANE_SIGV4=1); "
                        "credentials from the standard AWS chain")
    p.add_argument("--region", default=default(os.environ.get("MEMLANE_API_REGION") or os.environ.get("AWS_REGION")),
                   help="SigV4 region (default: the execute-api URL's, else AWS_REGION / the profile's)")
    p.add_argument("--local", action="store_true", default=default(False),
                   help="run in-process on --data-dir instead of calling a server")
    p.add_argument("--data-dir", type=Path, default=default(Path(os.environ.get("MEMLANE_DATA_DIR", ".memlane"))),
                   help="local mode's data directory (or MEMLANE_DATA_DIR)")
    p.add_argument("--json", action="store_true", default=default(False), help="machine-readable output")


def _version() -> str:
    try:
        return importlib.metadata.version("memlane")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        from . import __version__

        return __version__


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memlane", description="Durable, scoped memory for agents.")
    p.add_argument("--version", action="version", version=f"memlane {_version()}")
    _global_options(p, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, defaults=False)
    subparsers = p.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:  # each also takes the global options
        return subparsers.add_parser(name, parents=[common], **kwargs)

    s = command("serve", help="serve the API locally with the embedded adapters")
    s.add_argument("--port", type=int, default=int(os.environ.get("MEMLANE_PORT", 8420)))
    s.add_argument("--host", default=os.environ.get("MEMLANE_HOST", "127.0.0.1"))

    s = command("stores", help="create or list stores")
    s.add_argument("action", choices=["create", "list"])
    s.add_argument("name", nargs="?")
    s.add_argument("--instructions", help="extraction instructions for the store")
    s.add_argument("--summary-trigger-tokens", type=int, help="refresh a thread's summary past this many new tokens")
    s.add_argument("--summary-keep-recent", type=int, help="recent messages a thread summary leaves out")

    def scoped(sp: argparse.ArgumentParser, tenant_required: bool = False) -> None:
        sp.add_argument("store")
        sp.add_argument("--app", required=True)
        sp.add_argument("--tenant", required=tenant_required)
        sp.add_argument("--agent")
        sp.add_argument("--run")

    s = command("add", help="add a conversation or a text")
    scoped(s)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--text")
    g.add_argument("--messages", help="JSON file with [{role, content, name?, created_at?}], or - for stdin")
    s.add_argument("--sync", action="store_true", help="extract inline and print the memories")
    s.add_argument("--wait", action="store_true", help="wait for the extraction task to finish")
    s.add_argument("--request-id")

    s = command("import", help="add a JSONL file, one add body (with its request_id) per line; run it "
                                      "again to resume: what is in is replayed, not added twice")
    s.add_argument("file", help="JSONL: each line the body of POST /v1/stores/{store}/memories with a request_id")
    s.add_argument("--store", required=True)
    s.add_argument("--batch-size", type=int, default=100, choices=range(1, 101), metavar="1-100",
                   help="adds per request (POST .../memories:batch)")
    s.add_argument("--progress-every", type=int, default=1000, metavar="N",
                   help="when stderr is not a terminal, a progress line every N lines")

    s = command("search", help="search long-term memories")
    scoped(s, tenant_required=True)
    s.add_argument("query")
    s.add_argument("--top-k", type=int, default=10)
    s.add_argument("--evidence", action="store_true", help="include the source messages")
    s.add_argument("--type", dest="types", action="append", choices=["memory", "message", "summary"],
                   help="record type to search (repeat for several; default memory)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--exact-thread", dest="thread", action="store_const", const=True,
                   help="only the --run thread")
    g.add_argument("--other-threads", dest="thread", action="store_const", const=False,
                   help="the --run thread and the tenant's other threads (if its access policy recalls)")

    s = command("tasks", help="show a task, or list a tenant's tasks")
    s.add_argument("store")
    s.add_argument("request_id", nargs="?")
    s.add_argument("--app")
    s.add_argument("--tenant")
    s.add_argument("--wait", action="store_true")

    for name, text in (("keys", "create an API key (local mode) with its grant"),
                       ("grants", "grant a principal (e.g. an IAM role ARN) apps and tenants")):
        s = command(name, help=text)
        s.add_argument("action", choices=["create"] if name == "keys" else ["put"])
        s.add_argument("--principal", required=True, help="a name for the caller, or its IAM ARN")
        s.add_argument("--app", action="append", help="an app id (repeatable); '*' for every app")
        s.add_argument("--tenant", action="append", help="a tenant id (repeatable); default every tenant of the apps")
        s.add_argument("--admin", action="store_true", help="may manage stores and read audit logs")

    s = command("reindex", help="rebuild a store's search index from the table (drops the index first)")
    s.add_argument("store")

    s = command("schema", help="check the table and index against this version (validate), make what is "
                                      "missing (create), or rebuild the index from the table (recreate)")
    s.add_argument("action", choices=["validate", "create", "recreate"])

    s = command("fsck", help="compare a store's index with its table; --repair fixes the drift")
    s.add_argument("store")
    s.add_argument("--repair", action="store_true", help="delete orphan documents, index missing and stale ones")

    s = command("summary", help="show a thread's rolling summary, or refresh it now")
    s.add_argument("action", choices=["get", "refresh"])
    s.add_argument("store")
    s.add_argument("thread_id", help="the thread (run) id")
    s.add_argument("--app", required=True)
    s.add_argument("--tenant", required=True)
    s.add_argument("--agent", help="default __default__")
    s.add_argument("--wait", action="store_true", help="refresh: wait for the task to finish")

    s = command("messages", help="read a run's messages (short-term memory)")
    scoped(s, tenant_required=True)
    s.add_argument("--limit", type=int, default=50)

    s = command("threads", help="create, list, get or delete threads (a run with a stable id)")
    s.add_argument("action", choices=["create", "list", "get", "delete"])
    s.add_argument("store")
    s.add_argument("--app", required=True)
    s.add_argument("--tenant", required=True)
    s.add_argument("--agent", help="the thread's agent (create: default __default__; list: only its threads)")
    s.add_argument("--thread", help="the thread id (create: default a new one)")
    s.add_argument("--policy", choices=["recall_and_store", "recall_only", "store_only", "none"])
    s.add_argument("--metadata", help="JSON object kept with the thread (create)")
    s.add_argument("--limit", type=int, default=50)

    s = command("context", help="a thread's context card: profiles, summary, memories, plans, recent turns")
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

    from .mcp.cli import add_parser as add_mcp_parser  # `memlane mcp` (memlane.mcp): wiring only

    add_mcp_parser(subparsers, [common])

    # Listed for --help only: main() hands `bench ...` to memlane.bench, which has its own parser.
    subparsers.add_parser("bench", add_help=False,
                          help="benchmarks: locomo, scale, tokens, soak, updates, calibrate, context (memlane bench -h)")
    return p


COMMANDS = {"stores": cmd_stores, "add": cmd_add, "import": cmd_import, "search": cmd_search, "tasks": cmd_tasks,
            "messages": cmd_messages, "threads": cmd_threads, "context": cmd_context,
            "summary": cmd_summary}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from .bench import main as bench_main

        return bench_main(argv[1:])
    args = parser().parse_args(argv)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "mcp":  # `memlane mcp` (memlane.mcp): wiring only
        from .mcp.cli import run as run_mcp

        return run_mcp(args, InProcessTransport)
    operator = {"keys": cmd_access, "grants": cmd_access, "reindex": cmd_reindex, "fsck": cmd_fsck,
                "schema": cmd_schema}
    if args.command in operator:
        from .bootstrap import MissingExtra

        try:
            return operator[args.command](args)
        except MissingExtra as missing:
            print(f"error: {missing}", file=sys.stderr)
            return EXIT_MISSING_EXTRA
    try:
        from .client import ApiError, MemlaneClient, SigV4Unavailable
        from .sdk import ConnectionFailed
    except ModuleNotFoundError as missing:
        print(f"error: `memlane {args.command}` needs the SDK ({missing.name} is missing): "
              "pip install 'memlane[sdk]'", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    try:
        client = (MemlaneClient(InProcessTransport(args.data_dir)) if args.local
                  else MemlaneClient(args.url, api_key=args.api_key, region=args.region,
                                     auth="sigv4" if args.sigv4 else None))
    except SigV4Unavailable as cannot:
        print(f"error: {cannot}", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    except RuntimeError as busy:  # bootstrap.DataDirInUse: a server (or another --local) owns the data dir
        print(f"error: {busy}", file=sys.stderr)
        return 4
    try:
        return COMMANDS[args.command](args, client)
    except ConnectionFailed as error:  # before ApiError, which it is
        print(f"error: cannot reach {args.url} ({error.message}); start it with `memlane serve` or use --local",
              file=sys.stderr)
        return 3
    except ApiError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
