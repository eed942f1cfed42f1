"""The `memlane` command: run the local service, and talk to one through the SDK (or in-process with --local).

Exit codes (docs/cli.md): 0 ok; 1 the command ran and found something not clean (an import's refused lines,
fsck drift, schema differences); 2 the API refused (its error code on stderr); 3 the server cannot be reached;
4 the data dir is in use by another process; 5 what the command needs is not installed or configured (an
optional extra, AWS credentials, a region); 6 a --wait gave up; 64 a usage error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from typing import TYPE_CHECKING, Any

from . import admin, data, dream, operator, working
from .local import InProcessTransport
from .options import DEFAULT_URL, EXIT_USAGE, Commands, Parser, UsageError, global_options
from .output import error

if TYPE_CHECKING:  # the SDK needs httpx (memlane[sdk]); `serve` and the operator commands do not
    from ..sdk import Memlane

__all__ = ["DEFAULT_URL", "EXIT_USAGE", "InProcessTransport", "main", "parser"]

EXIT_API_ERROR = 2
EXIT_UNREACHABLE = 3
EXIT_DATA_DIR_IN_USE = 4
EXIT_MISSING_EXTRA = 5
EXIT_WAIT_TIMEOUT = 6
EXIT_INTERRUPTED = 130


def _mcp(commands: Commands) -> None:
    """`memlane mcp` (memlane.mcp): its parser and run live there; the global options and --local are ours."""
    from ..mcp.cli import add_parser, run

    add_parser(commands.subparsers, [commands.common]).set_defaults(
        handler=lambda args: run(args, InProcessTransport), over_api=False)


# The families of commands, in --help order: each a `register(commands)`. A command another module provides is
# registered the same way (as `memlane mcp` is): add its register function here.
FAMILIES = (operator.register, data.register, admin.register, working.register, dream.register, _mcp)


def _version() -> str:
    try:
        return importlib.metadata.version("memlane")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        from .. import __version__

        return __version__


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="memlane", description="Durable, scoped memory for agents. Exit codes: 0 ok, 1 not clean, "
                                           "2 API error, 3 unreachable, 4 data dir in use, 5 missing extra, "
                                           "6 wait timed out, 64 usage.")
    p.add_argument("--version", action="version", version=f"memlane {_version()}")
    global_options(p, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    global_options(common, defaults=False)
    commands = Commands(p.add_subparsers(dest="command", required=True, metavar="COMMAND"), common)
    for register in FAMILIES:
        register(commands)
    # Listed for --help only: main() hands `bench ...` to memlane.bench, which has its own parser.
    commands.subparsers.add_parser("bench", add_help=False, help="benchmarks: locomo, scale, tokens, soak, updates, "
                                                                 "calibrate, context, messages (memlane bench -h)")
    return p


def _bench(argv: list[str]) -> int:
    from .. import process
    from ..bench import main as bench_main

    process.settle()  # measured as `memlane serve` runs: with its garbage collector settings
    try:
        return bench_main(argv)
    except SystemExit as done:  # its parser's usage error is ours (64); -h exits 0
        if done.code == 2:
            return EXIT_USAGE
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    try:
        args = parser().parse_args(argv)
    except SystemExit as done:
        if done.code == EXIT_USAGE:  # printed already; returned so that callers get it as any other code
            return EXIT_USAGE
        raise  # --help, --version
    args.url_given = any(a == "--url" or a.startswith("--url=") for a in argv)
    try:
        return _call(args) if args.over_api else _operate(args)
    except UsageError as usage:
        print(f"memlane {args.command}: error: {usage}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `memlane ... --json | head`: the reader has what it wanted (a trial: a traceback, exit 1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        return 0


# Commands that work on the data dir or the engines the environment configures, never through a server.
_ON_ENGINES = frozenset({"worker", "keys", "grants", "reindex", "schema", "fsck", "readings"})


def _operate(args: argparse.Namespace) -> int:
    """A command that calls no route: the errors of the table, index and settings it works on."""
    from ..bootstrap import DataDirInUse, Misconfigured, MissingExtra
    from ..domain.errors import MemlaneError

    if args.command in _ON_ENGINES and args.url_given:
        # It works on the data dir or the engines the environment names, never through a server: a --url would
        # be ignored, and the command run on an empty ./.memlane instead (a trial's `fsck STORE --url ...`).
        raise UsageError(f"`memlane {args.command}` works on --data-dir (or the engines MEMLANE_MODE configures), "
                         "not on a server: leave --url out")
    try:
        return args.handler(args)
    except (MissingExtra, Misconfigured) as missing:
        error(args, str(missing))
        return EXIT_MISSING_EXTRA
    except DataDirInUse as busy:
        error(args, str(busy))
        return EXIT_DATA_DIR_IN_USE
    except MemlaneError as refused:
        error(args, f"{refused.code}: {refused.message}", code=refused.code, message=refused.message)
        return EXIT_API_ERROR


def _call(args: argparse.Namespace) -> int:
    """A command over the SDK: its errors become the exit codes scripts rely on, the error on stderr."""
    from pydantic import ValidationError

    try:
        from ..sdk import ApiError, ConnectionFailed, WaitTimeout
    except ModuleNotFoundError as missing:
        error(args, f"`memlane {args.command}` needs the SDK ({missing.name} is missing): pip install 'memlane[sdk]'")
        return EXIT_MISSING_EXTRA
    transport = _local(args) if args.local else None
    if isinstance(transport, int):
        return transport
    client = _client(args, transport)
    if isinstance(client, int):
        return client
    try:
        return args.handler(args, client)
    except ConnectionFailed as lost:  # before ApiError, which it is
        where = "the local service" if args.local else args.url
        error(args, f"cannot reach {where} ({lost.message}); start it with `memlane serve` or use --local",
              status=None, code=lost.code, message=lost.message, field=None)  # the documented shape, no HTTP status
        return EXIT_UNREACHABLE
    except WaitTimeout as late:
        error(args, f"{late.code}: {late.message}", status=None, code=late.code, message=late.message, field=None)
        return EXIT_WAIT_TIMEOUT
    except ApiError as refused:
        error(args, str(refused), status=refused.status, code=refused.code, message=refused.message,
              field=refused.field)
        return EXIT_API_ERROR
    except ValidationError as invalid:  # the SDK checks a body with the API's own model before sending it
        first = invalid.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        error(args, f"invalid_input: {field}: {first['msg']}", status=400, code="invalid_input",
              message=first["msg"], field=field)
        return EXIT_API_ERROR
    finally:
        client.close()
        if transport is not None:
            transport.shutdown()


def _local(args: argparse.Namespace) -> Any:
    """--local: the in-process transport on the data dir, or the exit code of why there is none."""
    from ..bootstrap import DataDirInUse, Misconfigured, MissingExtra

    try:
        return InProcessTransport(args.data_dir)
    except (MissingExtra, Misconfigured) as missing:
        error(args, str(missing))
        return EXIT_MISSING_EXTRA
    except DataDirInUse as busy:  # a server (or another --local) owns the data dir
        error(args, str(busy))
        return EXIT_DATA_DIR_IN_USE


def _client(args: argparse.Namespace, transport: Any = None) -> "Memlane | int":
    """The SDK client the options name (over `transport` with --local), or the exit code of why there is none."""
    from ..sdk import Memlane, SigV4Unavailable

    if transport is not None:
        return Memlane("http://memlane.local", transport=transport)
    try:
        return Memlane(args.url, args.api_key, "sigv4" if args.sigv4 else None, region=args.region)
    except SigV4Unavailable as cannot:
        error(args, str(cannot))
        return EXIT_MISSING_EXTRA


if __name__ == "__main__":
    sys.exit(main())
