"""`memlane mcp`: the options and the run. memlane's CLI adds the parser and hands the parsed arguments
here, with its in-process transport for `--local`; the global options (--url, --api-key, --sigv4,
--region, --local, --data-dir) are the CLI's."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any, Callable

EXIT_MISSING_EXTRA = 5  # as the CLI's: what the command needs is not installed


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    s = subparsers.add_parser("mcp", parents=parents, help="serve a store's memory to MCP clients (stdio, or "
                              "--http PORT), inside one fixed scope")
    s.add_argument("--store", required=True, help="the memory store")
    s.add_argument("--app", required=True, help="the app id: fixed for every tool call")
    s.add_argument("--tenant", required=True, help="the tenant (user) id: fixed for every tool call")
    s.add_argument("--agent", help="the agent id: writes go to it and reads stay in it (default: every agent)")
    s.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on PORT (path /mcp) instead of stdio")
    s.add_argument("--host", default="127.0.0.1", help="--http address (default 127.0.0.1)")
    return s


class _OneAtATime:
    """The in-process transport, one request at a time: MCP runs tool calls on worker threads."""

    def __init__(self, transport: Any):
        self.transport, self.lock = transport, threading.Lock()

    def handle_request(self, request: Any) -> Any:
        with self.lock:
            return self.transport.handle_request(request)

    def close(self) -> None:
        self.transport.close()


def run(args: argparse.Namespace, in_process: Callable[[Any], Any]) -> int:
    """Serve until the client goes (stdio) or the process is stopped (--http). `in_process(data_dir)` makes
    the CLI's in-process transport for --local."""
    try:
        from ..sdk import Memlane, SigV4Unavailable
        from ..sdk.errors import NotFound
        from .memory import Binding
        from .server import build_server
    except ModuleNotFoundError as missing:
        print(f"error: `memlane mcp` needs the mcp extra ({missing.name} is missing): pip install 'memlane[mcp]'",
              file=sys.stderr)
        return EXIT_MISSING_EXTRA
    binding = Binding(store=args.store, app_id=args.app, tenant_id=args.tenant, agent_id=args.agent)
    try:
        if args.local:
            client = Memlane("http://memlane.local", transport=_OneAtATime(in_process(args.data_dir)))
        else:
            client = Memlane(args.url, api_key=args.api_key, auth="sigv4" if args.sigv4 else None, region=args.region)
    except SigV4Unavailable as cannot:
        print(f"error: {cannot}", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    except RuntimeError as busy:  # bootstrap.DataDirInUse: a server (or another --local) owns the data dir
        print(f"error: {busy}", file=sys.stderr)
        return 4
    with client:
        if args.local:  # the user's own data directory: the store is made on first use
            try:
                client.stores.get(args.store)
            except NotFound:
                client.stores.create(args.store)
        server = build_server(client, binding)
        if args.http is None:
            server.run("stdio")
        else:
            server.run("streamable-http", host=args.host, port=args.http)
    return 0
