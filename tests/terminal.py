"""Run a command with its stderr on a pseudo-terminal or on a pipe, and read what it wrote there: progress
output is for people on a terminal, and a log file must not fill with carriage returns."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path


def stderr_of(argv: list[str], *, terminal: bool, env: dict[str, str], cwd: Path | None = None,
              timeout: float = 300) -> tuple[int, str]:
    """The exit code and everything written to stderr (stdout is discarded)."""
    if not terminal:
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd,
                              timeout=timeout)
        return done.returncode, done.stderr.decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout), b"".join(chunks).decode()
