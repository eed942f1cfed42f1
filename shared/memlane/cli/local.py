"""`--local`: the API in this process, on the data dir's local adapters, without HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


class InProcessTransport:
    """An httpx transport (duck-typed, so that importing the CLI needs no httpx) that runs requests through
    the same resolver as the server, on the local adapters, without HTTP. Jobs are processed before each
    answer returns, so `add` then `search` works in one go."""

    def __init__(self, data_dir: Path):
        from ..api.app import build_api
        from ..bootstrap import build_local
        from ..config import Settings

        self.service = build_local(Settings.from_env(data_dir=data_dir))
        self.app = build_api(self.service.deps)
        self.owned = True  # built here: shutdown() closes it

    def handle_request(self, request: "httpx.Request") -> "httpx.Response":
        import httpx

        from ..server import _LambdaContext, http_event

        path = request.url.raw_path.decode()
        event = http_event(request.method, path, {"content-type": "application/json"}, request.read(), "127.0.0.1")
        result = self.app.resolve(event, _LambdaContext())
        self.service.drain()
        return httpx.Response(result["statusCode"], headers=result.get("headers") or {},
                              content=(result.get("body") or "").encode())

    def close(self) -> None:
        pass  # one transport may serve several clients (tests, examples): the service outlives each

    def shutdown(self) -> None:
        """Close the service this transport built: its queue stops and the data dir's lock is released."""
        if getattr(self, "owned", False):
            self.service.close()
