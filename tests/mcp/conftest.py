"""The MCP server end to end: a real `memlane serve`, reached through `memlane mcp` with the mcp SDK's own client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from memlane.sdk import Memlane

from ..e2e.conftest import Server

STORE, APP = "mcp-demo", "assistant"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(Path(tmp_path_factory.mktemp("mcp")) / "data").start()
    with Memlane(srv.url) as client:
        client.stores.create(STORE, summary_keep_recent=0)  # a summary covers every turn: tenant B has one to leak
    yield srv
    srv.stop()


def mcp_command(*options: str) -> tuple[str, list[str], dict[str, str]]:
    """`memlane mcp ...` as a subprocess command line, with this checkout's package first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MEMLANE_LOG_LEVEL": "WARNING"}
    return sys.executable, ["-m", "memlane.cli", "mcp", *options], env


def payload(result: Any) -> Any:
    """A tool's answer as the model reads it: the JSON of its one text block."""
    (block,) = result.content
    return json.loads(block.text)
