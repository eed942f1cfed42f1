"""End-to-end: a real `memlane serve` process, spoken to over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "Server":
        env = {**os.environ, "MEMLANE_LOG_LEVEL": "WARNING"}
        self.log = open(self.data_dir.parent / f"server-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memlane.cli", "--data-dir", str(self.data_dir), "serve", "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"memlane serve exited: {(self.data_dir.parent / f'server-{self.port}.log').read_text()}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("memlane serve did not answer")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()
