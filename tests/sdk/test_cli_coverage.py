"""Every route of the API has a CLI command, and every CLI command is either one of those or an operator
command: the OpenAPI document the server publishes is walked, so a route added without its command fails
here, and so does a command that names a route the API does not have."""

from __future__ import annotations

import argparse
import json

from memlane import cli
from memlane.api.app import api_description
from memlane.cli.routes import ALSO_COMMANDS, LOCAL_COMMANDS, ROUTE_COMMANDS
from memlane.sdk.routes import ROUTES

METHODS = ("get", "put", "post", "delete", "patch")


def _documented_routes() -> set[str]:
    """The SDK name of each route of /openapi.json (test_openapi_coverage checks those names are complete)."""
    by_path = {(route.method, route.path): route.sdk for route in ROUTES}
    paths = json.loads(api_description())["paths"]
    return {by_path[(method.upper(), path)] for path, item in paths.items() for method in item if method in METHODS}


def _leaf_commands(p: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[str]:
    """`stores create`, `search`, ...: each runnable command of the parser, nested sub-commands followed."""
    found: set[str] = set()
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _leaf_commands(sub, (*prefix, name)) or {" ".join((*prefix, name))}
    return found


def test_every_route_has_a_command_and_every_command_names_a_route() -> None:
    documented = _documented_routes()
    assert documented - set(ROUTE_COMMANDS) == set(), "routes of /openapi.json without a CLI command"
    assert set(ROUTE_COMMANDS) - documented == set(), "CLI commands for routes the API does not have"
    assert set(ALSO_COMMANDS.values()) - documented == set(), "CLI commands for routes the API does not have"


def test_every_command_of_the_parser_is_a_route_s_or_a_local_one() -> None:
    commands = _leaf_commands(cli.parser())
    assert set(ROUTE_COMMANDS.values()) - commands == set(), "the table names commands the parser lacks"
    assert commands - set(ROUTE_COMMANDS.values()) - set(ALSO_COMMANDS) - set(LOCAL_COMMANDS) == set(), \
        "commands in no table (an API command: ROUTE_COMMANDS or ALSO_COMMANDS; an operator one: LOCAL_COMMANDS)"
    assert set(ALSO_COMMANDS) | set(LOCAL_COMMANDS) <= commands, "the tables name commands the parser lacks"
