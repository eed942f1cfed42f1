"""Commands that call no route: run the local service, and operate on the table and index the environment
configures (grants and keys, reindex, fsck, readings, schema). Each takes `(args)` and builds only what it needs."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from .options import Commands, UsageError
from .output import emit, table

if TYPE_CHECKING:
    from ..config import Settings
    from ..services.deps import Deps

EXIT_UNCLEAN = 1  # the command ran, and what it checked is not clean (drift, differences): see its output


def register(c: Commands) -> None:
    s = c.command("serve", "serve the API: locally with the embedded adapters, or as one of several servers over "
                           "shared engines (docs/deploy.md#scaling-out-without-aws)", serve, api=False)
    s.add_argument("--port", type=int, default=int(os.environ.get("MEMLANE_PORT", 8420)))
    s.add_argument("--host", default=os.environ.get("MEMLANE_HOST", "127.0.0.1"))
    s.add_argument("--no-worker", dest="worker", action="store_false", default=None,
                   help="run no jobs in this process: `memlane worker` processes do (MEMLANE_WORKER=false; "
                        "needs the shared queue)")

    s = c.command("worker", "run the jobs of the shared queue (SQS or compatible) until SIGTERM/SIGINT, beside "
                            "`memlane serve --no-worker` processes", worker, api=False)
    s.add_argument("--threads", type=_threads, default=None, help="jobs at once, 1..64 (MEMLANE_WORKER_THREADS, "
                                                                  "default 2)")
    s.add_argument("--health-port", type=int, default=None,
                   help="serve GET /health on this port for a probe (MEMLANE_WORKER_HEALTH_PORT; address "
                        "MEMLANE_WORKER_HEALTH_HOST, default 127.0.0.1); off by default")

    groups = {}
    for name, action, text in (("keys", "create", "create an API key (local mode) with its grant"),
                               ("grants", "put", "grant a principal (e.g. an IAM role ARN) apps and tenants")):
        groups[name] = group = c.group(name, text)
        s = c.command(action, text, access, api=False, within=group)
        s.add_argument("--principal", required=True, help="a name for the caller, or its IAM ARN")
        s.add_argument("--app", action="append", help="an app id (repeatable); '*' for every app")
        s.add_argument("--tenant", action="append", help="a tenant id (repeatable); default every tenant of the apps")
        s.add_argument("--admin", action="store_true", help="may manage stores and read audit logs")
    c.command("list", "the API keys: id, principal, created (the keys themselves are never kept)", keys_list,
              api=False, within=groups["keys"])
    s = c.command("revoke", "withdraw API keys at once (a running server refuses them from its next request)",
                  keys_revoke, api=False, within=groups["keys"])
    which = s.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", help="the key itself")
    which.add_argument("--id", dest="key_id", help="its id, as `keys list` shows it")
    which.add_argument("--principal", help="every key of this principal (its grant stays: `grants` manage it)")

    s = c.command("reindex", "rebuild a store's search index from the table (drops the index first)", reindex,
                  api=False)
    s.add_argument("store")

    s = c.command("schema", "check the table and index against this version (validate), make what is missing "
                            "(create), or rebuild the index from the table (recreate)", schema, api=False)
    s.add_argument("action", choices=["validate", "create", "recreate"])

    s = c.command("fsck", "compare a store's index with its table; --repair fixes the drift", fsck, api=False)
    s.add_argument("store")
    s.add_argument("--repair", action="store_true", help="delete orphan documents, index missing and stale ones")

    s = c.command("readings", "count the memories whose kept reading another version's rules made (searches read "
                              "them anew: slower); --repair writes them again (after an upgrade)", readings, api=False)
    s.add_argument("store")
    s.add_argument("--repair", action="store_true", help="write each stale reading again (the table only)")


def _threads(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError("a number from 1 to 64 is expected")
    return int(text)


def serve(args: argparse.Namespace) -> int:
    from . import EXIT_DATA_DIR_IN_USE
    from ..bootstrap import DataDirInUse
    from ..config import Settings
    from ..server import serve as run

    logging.basicConfig(level=os.environ.get("MEMLANE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        run(Settings.from_env(data_dir=args.data_dir, port=args.port, host=args.host, worker=args.worker))
    except DataDirInUse as busy:  # exit 4, as `--local` on a data dir in use (a trial: serve exited 1)
        print(f"error: memlane serve: {busy}", file=sys.stderr)
        return EXIT_DATA_DIR_IN_USE
    except OSError as taken:  # the port: in use too, said in a line (a trial: an OSError traceback)
        if taken.errno != errno.EADDRINUSE:
            raise
        print(f"error: memlane serve: {args.host}:{args.port} is in use by another process: stop it, or choose "
              "another port (--port, MEMLANE_PORT)", file=sys.stderr)
        return EXIT_DATA_DIR_IN_USE
    return 0


def worker(args: argparse.Namespace) -> int:
    from ..config import Settings
    from ..worker import work

    logging.basicConfig(level=os.environ.get("MEMLANE_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    work(Settings.from_env(data_dir=args.data_dir, worker_threads=args.threads, worker_health_port=args.health_port))
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def access(args: argparse.Namespace) -> int:
    """Grants and API keys are written straight to the configured table (the data dir locally; the
    deployed DynamoDB table with MEMLANE_MODE=aws). Only the table is built: no index, queue or model."""
    from ..bootstrap import build_operator
    from ..config import Settings
    from ..services import access as grants

    if args.tenant and not args.app:  # a tenant limit needs the app it belongs to
        raise UsageError("--tenant needs --app (the app the tenants belong to)")
    apps = {app: args.tenant or ["*"] for app in args.app or []}
    if not apps and not args.admin:
        raise UsageError("give --app (with optional --tenant) or --admin")
    if apps and args.admin:  # an admin reaches every tenant: a key shown as limited to some would mislead
        raise UsageError("--admin reaches every app and tenant: leave --app/--tenant out, or drop --admin for a "
                         "grant limited to them")
    deps = build_operator(Settings.from_env(data_dir=args.data_dir))
    if args.command == "keys":
        key = grants.create_api_key(deps, args.principal, apps, admin=args.admin)
        emit(args, {"principal": args.principal, "api_key": key, "apps": apps, "admin": args.admin},
             f"API key for {args.principal} (shown once, keep it secret):\n{key}\n"
             "restart `memlane serve` to enforce keys if it was running without any")
    else:
        grant = grants.grant(deps, args.principal, apps, admin=args.admin)
        emit(args, grant.model_dump(mode="json"), f"granted {args.principal}: {apps}{' (admin)' if args.admin else ''}")
    return 0


def keys_list(args: argparse.Namespace) -> int:
    from ..bootstrap import build_operator
    from ..services import access as grants

    keys = grants.api_keys(build_operator(_existing(args)))
    columns = [("ID", lambda k: k["key_id"]), ("PRINCIPAL", lambda k: k["principal"]),
               ("CREATED", lambda k: k["created_at"] or "-")]
    emit(args, {"keys": keys}, lambda: table(keys, columns, empty="(no keys)"))
    return 0


def keys_revoke(args: argparse.Namespace) -> int:
    from ..bootstrap import build_operator
    from ..services import access as grants

    revoked = grants.revoke_api_keys(build_operator(_existing(args)), key=args.key, key_id=args.key_id,
                                     principal=args.principal)
    emit(args, {"revoked": revoked}, f"revoked {len(revoked)} key(s): {', '.join(revoked)}")
    return 0


def reindex(args: argparse.Namespace) -> int:
    """Rebuild a store's index from the table, on the adapters the environment configures."""
    from ..services.reindex import reindex as rebuild

    with _engines(_existing(args)) as deps:
        report = rebuild(deps, args.store, progress=_say)
    emit(args, vars(report), f"reindexed {report.store}: {report.indexed} memories of {report.tenants} tenants")
    return 0


def fsck(args: argparse.Namespace) -> int:
    """Compare a store's index with its table; repair the drift with --repair. Exit 1: drift left."""
    from ..services.fsck import fsck as check

    with _engines(_existing(args)) as deps:
        report = check(deps, args.store, repair=args.repair, progress=_say)
    drift = report.missing + report.orphans + report.stale
    emit(args, vars(report), f"{report.store}: {report.memories} memories, {report.documents} documents; "
                             f"{report.missing} missing, {report.orphans} orphans, {report.stale} stale"
                             + (f"; repaired {report.repaired}" if args.repair else ""))
    return 0 if drift == 0 or args.repair else EXIT_UNCLEAN


def _existing(args: argparse.Namespace) -> "Settings":
    """The settings of a command that reads what a data dir holds: refused when there is none (a trial's `fsck`
    without --data-dir made an empty ./.memlane and reported its store unknown)."""
    from .. import bootstrap
    from ..config import Settings

    settings = Settings.from_env(data_dir=args.data_dir)
    if settings.mode == "local" and not bootstrap.shared_engines(settings) and not settings.data_dir.is_dir():
        raise UsageError(f"no data dir at {settings.data_dir}: give --data-dir (or MEMLANE_DATA_DIR) of the one "
                         "`memlane serve` uses")
    return settings


@contextmanager
def _engines(settings: "Settings", **build: Any) -> Iterator["Deps"]:
    """The adapters the settings configure, for a command that compares or rebuilds them. On a data dir, under its
    lock (exit 4 while a server holds it): fsck read the table, then the index, while a server wrote both, and its
    repair deleted the documents written in between as orphans (a trial: accepted memories unsearchable)."""
    from .. import bootstrap

    if settings.mode == "local" and not bootstrap.shared_engines(settings):  # shared engines: no data dir
        service = bootstrap.build_local(settings, **build)
        try:
            yield service.deps
        finally:
            service.close()
    else:
        yield bootstrap.build(settings, **build)


def readings(args: argparse.Namespace) -> int:
    """Count the stale readings of a store's memories; write them again with --repair. Exit 1: stale ones left."""
    from ..bootstrap import build_operator
    from ..services.readings import readings as check

    report = check(build_operator(_existing(args)), args.store, repair=args.repair,
                   progress=_say)
    emit(args, vars(report), f"{report.store}: {report.memories} memories, {report.stale} stale readings"
                             + (f"; {report.written} written again" if args.repair else ""))
    return 0 if report.stale == report.written + report.changed_meanwhile else EXIT_UNCLEAN


def schema(args: argparse.Namespace) -> int:
    """Apply a schema policy now to the table and index the environment configures (services/schema.py).
    Exit 0: as expected (after creating or rebuilding); 1: differences left, each printed."""
    from .. import bootstrap
    from ..config import Settings
    from ..domain.schema import SchemaMismatch
    from ..services import schema as policy

    settings = Settings.from_env(data_dir=args.data_dir, schema_policy=args.action)
    embedder = None if args.action == "recreate" else _NoEmbedder()  # only a rebuild embeds
    try:
        if settings.mode == "local" and not bootstrap.shared_engines(settings):
            bootstrap.check_local_files(settings)  # validate: the files as they are, before opening them
        with _engines(settings, embedder=embedder, check_schema=False) as deps:
            report = policy.check(deps, args.action, rebuild=args.action == "recreate", progress=_say)
    except SchemaMismatch as mismatch:
        emit(args, {"policy": args.action, "ok": False, "differences": [str(d) for d in mismatch.differences]},
             "\n".join(str(d) for d in mismatch.differences))
        return EXIT_UNCLEAN
    lines = [f"created {made}" for made in report.created] + [f"rebuilt {store}" for store in report.rebuilt]
    emit(args, {"policy": args.action, "ok": True, **vars(report)}, "\n".join(lines + [f"schema ok ({args.action})"]))
    return 0


class _NoEmbedder:
    """Schema checks touch no vectors; this keeps them from loading a model."""

    name, dim = "none", 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("schema validate/create do not embed")
