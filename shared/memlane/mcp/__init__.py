"""memlane as an MCP server (`pip install 'memlane[mcp]'`, `memlane mcp`): see docs/mcp.md.

    from memlane.mcp import Binding, build_server
    from memlane.sdk import Memlane
    build_server(Memlane(url), Binding(store="notes", app_id="assistant", tenant_id="alice")).run()

Names load on first use, so that `memlane.mcp.cli` (imported by the CLI to list its options) needs
neither the mcp SDK nor httpx until `memlane mcp` runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Binding", "MemoryTools", "build_server"]


def __getattr__(name: str) -> Any:
    if name in ("Binding", "MemoryTools"):
        from . import memory

        return getattr(memory, name)
    if name == "build_server":
        from .server import build_server

        return build_server
    raise AttributeError(name)
