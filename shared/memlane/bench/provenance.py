"""Where a benchmark figure came from, recorded in its JSON so a reader can rerun it: the git commit
(and whether the tree had uncommitted changes), package versions, the machine (cores, the BLAS
kernel numpy ran), the seed and the exact command line."""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

PACKAGES = ("memlane", "numpy", "onnxruntime", "tokenizers", "pydantic", "opensearch-py", "boto3",
            "mem0ai", "qdrant-client")  # the last two: the peer, when installed
# Settings that change what numpy's BLAS or the benchmark itself runs.
ENVIRONMENT = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
               "MKL_NUM_THREADS", "MEMLANE_LOCOMO")


def git(where: Path | None = None) -> dict[str, Any]:
    """The commit of the checkout memlane runs from, and whether it has uncommitted changes."""
    cwd = str(where or Path(__file__).resolve().parent)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, check=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "note": "not a git checkout (installed package)"}
    return {"commit": commit, "dirty": bool(status.strip())}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def blas() -> dict[str, Any]:
    """numpy's BLAS as built, and the kernel OpenBLAS chose at run time (what threadpoolctl reports,
    read the same way: the loaded library's own get_corename)."""
    info: dict[str, Any] = {}
    try:
        built = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        info.update({"name": built.get("name"), "version": built.get("version")})
    except Exception:  # noqa: BLE001 — older numpy: the build facts are optional
        pass
    for path in _loaded_libraries():
        if "openblas" not in Path(path).name.lower():
            continue
        lib = ctypes.CDLL(path)
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                fn = getattr(lib, f"{prefix}_get_corename{suffix}", None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    info["corename"] = fn().decode()
                    threads = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                    if threads is not None:
                        info["threads"] = int(threads())
                    info["library"] = Path(path).name
                    return info
    return info


def _loaded_libraries() -> list[str]:
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(line.split()[-1] for line in maps if line.rstrip().endswith(".so")
                              or ".so." in line.split()[-1]))


def command() -> str:
    """The command line as typed: `memlane bench ...` when run through the CLI."""
    argv = list(sys.argv)
    if argv and (Path(argv[0]).name == "memlane" or argv[0].endswith(os.path.join("memlane", "cli.py"))):
        argv[0] = "memlane"
    elif argv and argv[0].endswith(("__main__.py", "-c")):
        argv = [Path(sys.executable).name, "-m", "memlane", *argv[1:]]
    return shlex.join(argv)


def collect(*, seed: int | None = None) -> dict[str, Any]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"git": git(), "packages": versions(), "python": sys.version.split()[0],
            "machine": {"cores": os.cpu_count(), "cores_usable": cores, "blas": blas(),
                        "environment": {k: os.environ[k] for k in ENVIRONMENT if k in os.environ}},
            "seed": seed, "command": command(), "cwd": os.getcwd()}
