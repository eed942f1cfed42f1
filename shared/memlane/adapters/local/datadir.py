"""The local data directory: private (0700, files 0600) and owned by one process at a time.

An exclusive `flock` on `<data dir>/lock` makes this process the only owner: a second
`memlane serve`, or a `--local` CLI next to a running server, is refused instead of running
the same jobs twice. The kernel drops the lock when the owner dies, even by kill -9 — so a
process that holds it knows every lease in the queue belongs to a dead owner and may release
them at once.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .database import FILE_MODE

DIR_MODE = 0o700


class DataDirInUse(RuntimeError):
    """Another live process owns the data directory."""


class DataDirUnusable(RuntimeError):
    """The data directory cannot be made or written: a read-only disk, no permission, a file in its place."""


class DataDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = None
        self.unclean = False

    def acquire(self) -> "DataDir":
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            os.chmod(self.path, DIR_MODE)
            fd = os.open(self.path / "lock", os.O_CREAT | os.O_RDWR, FILE_MODE)
        except OSError as refused:  # a traceback said it before
            raise DataDirUnusable(f"the data directory {self.path} cannot be used: {refused.strerror or refused} "
                                  "(memlane keeps its state there: choose a writable one with --data-dir or "
                                  "MEMLANE_DATA_DIR)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DataDirInUse(
                f"the data directory {self.path.resolve()} is in use by another memlane process (pid {owner}); "
                "stop it first, or talk to the running server (memlane --url ...) instead of --local") from None
        # A pid left in the file: its process ended without `release` (kill -9, a crash, a power cut).
        self.unclean = bool(os.read(fd, 32).strip())
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        self.make_private()
        return self

    def make_private(self) -> None:
        """Files of an older version were created 0644: close them to the owner."""
        for child in self.path.iterdir():
            if child.is_file() and not child.is_symlink():
                os.chmod(child, FILE_MODE)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # a clean end: the next owner finds no pid (`unclean`)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None
