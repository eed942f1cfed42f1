"""The options every command takes, the scope options, and how a family adds its commands to the parser."""

from __future__ import annotations

import argparse
import sys
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

DEFAULT_URL = "http://127.0.0.1:8420"
EXIT_USAGE = 64  # sysexits' EX_USAGE: apart from 2, which is the API's refusal


class UsageError(Exception):
    """The command line asks for something it cannot (a missing option a choice made necessary): exit 64."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 64, not 2 (2 is an API error: scripts tell the two apart)."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)  # nothing on stdout on an error (docs/cli.md): a script reads stdout
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def global_options(p: argparse.ArgumentParser, *, defaults: bool) -> None:
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
    p.add_argument("--json", action="store_true", default=default(False),
                   help="print the API's JSON answer (one document) instead of a table")


Handler = Callable[..., int]


class Commands:
    """Adds commands to the parser; each takes the global options, after it as before it. `run` is called with
    `(args, client)` (an SDK `Memlane`) when `api`, else with `(args)`."""

    def __init__(self, subparsers: Any, common: argparse.ArgumentParser):
        self.subparsers, self.common = subparsers, common

    def command(self, name: str, help: str, run: Handler | None = None, *, api: bool = True,
                within: Any = None, **kwargs: Any) -> argparse.ArgumentParser:
        p = (within or self.subparsers).add_parser(name, parents=[self.common], help=help, description=help, **kwargs)
        if run is not None:
            p.set_defaults(handler=run, over_api=api)
        return p

    def group(self, name: str, help: str) -> Any:
        """A command with sub-commands (`memlane stores create ...`): add them with `command(..., within=)`."""
        return self.command(name, help).add_subparsers(dest="action", required=True, metavar="ACTION")


def store_and_tenant(p: argparse.ArgumentParser, *, tenant: bool = True) -> None:
    p.add_argument("store")
    p.add_argument("--app", required=True)
    p.add_argument("--tenant", required=tenant)


def scoped(p: argparse.ArgumentParser, tenant_required: bool = False) -> None:
    store_and_tenant(p, tenant=tenant_required)
    p.add_argument("--agent")
    p.add_argument("--run")


def scope_of(args: argparse.Namespace) -> dict[str, Any]:
    scope = {"app_id": args.app, "tenant_id": args.tenant, "agent_id": args.agent, "run_id": args.run}
    return {k: v for k, v in scope.items() if v is not None}


def tenant_of(args: argparse.Namespace) -> dict[str, str]:
    """The tenant a request id belongs to, when the command names it (request ids are per tenant)."""
    return {"app_id": args.app, "tenant_id": args.tenant} if args.app and args.tenant else {}


def json_object(text: str) -> dict[str, Any]:
    """An option's JSON object (argparse type): a usage error when it is not one."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from error
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("a JSON object is expected")
    return value


def seconds(text: str) -> float:
    """A time limit such as `--timeout` (argparse type): a finite number, 0 or more (0: look once), else a usage
    error. A wait until `nan` never ends, and one of -1 means nothing."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan  # "soon": refused below, with the same message
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"a number of seconds, 0 or more, is expected, not {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """`name=value` (argparse type)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("name=value is expected")
    return name, value
