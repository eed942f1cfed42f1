"""`memlane import` against a running `memlane serve`: progress on stderr (whole lines when stderr is not a
terminal), a summary of accepted / replayed / refused lines, an exit code scripts can rely on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from memlane import cli

from .conftest import Server

SCOPE = {"app_id": "crm", "tenant_id": "acme", "agent_id": "sync", "run_id": "export-1"}


def line(i: int) -> str:
    return json.dumps({"request_id": f"crm-{i:05d}", "scope": SCOPE,
                       "messages": [{"role": "user", "content": f"Customer {i} renewed contract C-{i}."}]})


@pytest.fixture()
def lexical_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hashing")  # the server inherits the environment
    monkeypatch.setenv("MEMLANE_RERANKER", "none")
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()


def test_memlane_import_prints_a_summary_progress_and_fails_on_a_refused_line(
        lexical_server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--url", lexical_server.url]
    export = tmp_path / "export.jsonl"
    export.write_text("".join(line(i) + "\n" for i in range(25)) + "[]\n")
    run = [*url, "import", str(export), "--store", "demo", "--batch-size", "10", "--progress-every", "10"]
    assert cli.main([*url, "stores", "create", "demo"]) == 0
    capsys.readouterr()

    assert cli.main(run) == 1  # a line was refused
    out, err = capsys.readouterr()
    assert "26 lines: 25 accepted, 0 replayed, 1 refused" in out
    assert "line 26: invalid_input" in out
    # stderr is not a terminal here: a whole line every 10 lines, no carriage return
    assert [x for x in err.splitlines() if x.startswith("progress:")] == ["progress: 10 lines", "progress: 20 lines"]
    assert "\r" not in err

    export.write_text("".join(line(i) + "\n" for i in range(25)))
    assert cli.main(run) == 0  # resumed: every line is in
    assert "25 lines: 0 accepted, 25 replayed, 0 refused" in capsys.readouterr().out


@pytest.mark.parametrize("terminal", [True, False])
def test_memlane_import_progress_is_live_on_a_terminal_and_whole_lines_in_a_log(tmp_path: Path,
                                                                                  terminal: bool) -> None:
    """The real command in its own process, stderr on a pseudo-terminal or on a pipe (a log file)."""
    import os
    import sys

    from ..terminal import stderr_of

    env = {**os.environ, "MEMLANE_EMBEDDER": "hashing", "MEMLANE_RERANKER": "none"}
    local = [sys.executable, "-m", "memlane.cli", "--local", "--data-dir", str(tmp_path / "data")]
    assert stderr_of([*local, "stores", "create", "demo"], terminal=False, env=env)[0] == 0
    export = tmp_path / "export.jsonl"
    export.write_text("".join(line(i) + "\n" for i in range(30)))
    code, err = stderr_of([*local, "import", str(export), "--store", "demo", "--batch-size", "10",
                           "--progress-every", "10"], terminal=terminal, env=env)
    assert code == 0, err
    if terminal:
        assert "\r30 lines: 30 accepted, 0 replayed, 0 refused" in err
    else:
        assert "\r" not in err
        assert [x for x in err.splitlines() if x.startswith("progress:")] == [
            "progress: 10 lines", "progress: 20 lines", "progress: 30 lines"]


def test_memlane_import_into_no_store_or_from_no_file_says_so_once(lexical_server: Server, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A trial (session 30): an import into a store that does not exist printed one `store_not_found` per line and
    exited 1 (some lines refused); a missing, unreadable or non-UTF-8 file ended in a traceback. Now: the service
    refuses the batch (exit 2, one error), and the file is a usage error (64)."""
    url = ["--url", lexical_server.url]
    export = tmp_path / "export.jsonl"
    export.write_text("".join(line(i) + "\n" for i in range(30)))
    assert cli.main([*url, "import", str(export), "--store", "nostore"]) == 2
    out, err = capsys.readouterr()
    assert err.count("store_not_found") == 1 and "line " not in out
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes("Caf\xe9\n".encode("latin-1"))
    for path in (tmp_path / "missing.jsonl", tmp_path, latin):
        assert cli.main([*url, "import", str(path), "--store", "demo"]) == 64
        assert "Traceback" not in capsys.readouterr().err
    listed = tmp_path / "one.json"
    listed.write_text(json.dumps({"role": "user", "content": "not a list"}))
    assert cli.main([*url, "add", "demo", "--app", "crm", "--tenant", "acme", "--messages", str(listed)]) == 64
    assert "a JSON list of messages" in capsys.readouterr().err
