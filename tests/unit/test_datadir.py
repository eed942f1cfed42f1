"""The local data directory: one owning process (issue 15 #8), private files (issue 10 #8)."""

from __future__ import annotations

import os
import stat

import pytest

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import DataDirInUse, build_local
from memlane.config import Settings
from memlane.services import ingest, stores


def local(data):
    return build_local(Settings.from_env(env={}, data_dir=data, reranker="none"), embedder=HashingEmbedder())


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_second_owner_of_the_data_dir_is_refused_until_the_first_closes(tmp_path):
    first = local(tmp_path / "data")
    try:
        with pytest.raises(DataDirInUse, match="in use by another memlane process"):
            local(tmp_path / "data")
    finally:
        first.close()
    local(tmp_path / "data").close()  # released: the next owner gets it


def test_data_dir_is_0700_and_every_file_0600(tmp_path):
    old = os.umask(0o022)  # a usual umask: files would be 0644 and the directory 0755
    try:
        svc = local(tmp_path / "data")
        stores.create(svc.deps, name="demo")
        ingest.add(svc.deps, "demo", scope={"app_id": "a"}, text="Alice's passport expires in March.")
        svc.drain()
        files = sorted(p.name for p in (tmp_path / "data").iterdir())
        assert {"table.db", "table.db-wal", "index.db", "lock"} <= set(files)
        assert mode(tmp_path / "data") == 0o700
        assert {name: mode(tmp_path / "data" / name) for name in files} == {name: 0o600 for name in files}
        svc.close()
    finally:
        os.umask(old)


def test_files_of_an_older_version_are_made_private(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "index.db").touch(mode=0o644)
    os.chmod(data / "index.db", 0o644)
    local(data).close()
    assert (mode(data), mode(data / "index.db")) == (0o700, 0o600)


def test_the_model_cache_inside_the_data_dir_is_0700(tmp_path):
    """A new user's trial: `<data dir>/models` was made 0755 (the umask's), beside a data dir of 0700."""
    from memlane.adapters.embedders.bert_onnx import write_atomically

    old = os.umask(0o022)
    try:
        write_atomically(tmp_path / "data" / "models" / "graph.onnx", b"x")
        assert mode(tmp_path / "data" / "models") == 0o700
    finally:
        os.umask(old)
