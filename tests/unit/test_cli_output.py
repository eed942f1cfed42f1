"""The CLI's output and exit codes, over a fake API: aligned tables with long text cut under a marker, errors on
stderr (a JSON document with --json), and the codes scripts rely on."""

from __future__ import annotations

import json
from typing import Any, Callable

import httpx
import pytest

from memlane import cli
from memlane.cli.output import MARK, table
from memlane.sdk import Memlane, Retry

NOW = "2026-01-02T03:04:05Z"  # as the API's models write a time


def test_a_table_aligns_its_columns_and_cuts_the_last_one_with_a_marker() -> None:
    rows = [{"id": "m1", "type": "fact", "text": "short"},
            {"id": "memory-22", "type": "preference", "text": "a long text " * 20}]
    columns = [("ID", lambda r: r["id"]), ("TYPE", lambda r: r["type"]), ("TEXT", lambda r: r["text"])]
    lines = table(rows, columns, width=60).splitlines()
    assert lines[0].split() == ["ID", "TYPE", "TEXT"]
    starts = {line.index(cell) for line, cell in zip(lines, ["TYPE", "fact", "preference"])}
    assert len(starts) == 1  # one column, one start
    assert all(len(line) <= 60 for line in lines)
    assert lines[2].endswith(MARK) and lines[1].endswith("short")
    assert table([], columns, empty="(no memories)") == "(no memories)"


def _fake(monkeypatch: pytest.MonkeyPatch, answer: Callable[[httpx.Request], httpx.Response]) -> None:
    monkeypatch.setattr(cli, "_client", lambda args, transport: Memlane("http://fake", transport=httpx.MockTransport(answer),
                                                             retry=Retry(attempts=1)))


def _task(status: str) -> dict[str, Any]:
    return {"request_id": "r1", "status": status, "scope": {"app_id": "a", "tenant_id": "t", "agent_id": "g",
                                                            "run_id": "r"},
            "created_at": NOW, "updated_at": NOW, "message_ids": []}


def test_into_a_pipe_a_table_is_the_same_whatever_terminal_ran_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in CI: a narrow COLUMNS (or a terminal's width) cut the text column of output piped to a file or
    a script, so the same command printed different lines on different machines."""
    rows = [{"id": "m1", "text": "Alice's loyalty number is TP-4481 and she flies on Tuesdays."}]
    columns = [("ID", lambda r: r["id"]), ("TEXT", lambda r: r["text"])]
    outputs = set()
    for width in ("40", "80", "300"):
        monkeypatch.setenv("COLUMNS", width)
        outputs.add(table(rows, columns))
    assert len(outputs) == 1 and "TP-4481 and she flies on Tuesdays." in outputs.pop()


def test_an_api_error_exits_2_with_its_code_on_stderr(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    refusal = {"error": {"code": "outside_grant", "message": "not yours", "field": "scope.tenant_id"}}
    _fake(monkeypatch, lambda request: httpx.Response(403, json=refusal))
    assert cli.main(["tasks", "demo", "r1", "--app", "a", "--tenant", "t"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == "error: 403 outside_grant: not yours"
    assert cli.main(["--json", "tasks", "demo", "r1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and json.loads(err) == {"error": {"status": 403, "code": "outside_grant", "message": "not yours",
                                                       "field": "scope.tenant_id"}}


def test_a_wait_that_gives_up_exits_6(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fake(monkeypatch, lambda request: httpx.Response(200, json=_task("PENDING")))
    assert cli.main(["tasks", "demo", "r1", "--wait", "--timeout", "0"]) == cli.EXIT_WAIT_TIMEOUT == 6
    assert "wait_timeout" in capsys.readouterr().err


def test_json_is_the_answer_as_sent(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fields the server left out stay out: no default of the model (kind, memories, outcomes, attempts) is
    invented."""
    _fake(monkeypatch, lambda request: httpx.Response(200, json=_task("SUCCEEDED")))
    assert cli.main(["--json", "tasks", "demo", "r1"]) == 0
    assert json.loads(capsys.readouterr().out) == _task("SUCCEEDED")
    assert cli.main(["tasks", "demo", "r1"]) == 0
    assert capsys.readouterr().out.strip() == "request r1: SUCCEEDED"


def test_input_the_sdk_refuses_before_sending_exits_2_as_the_api_would(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sent: list[httpx.Request] = []
    _fake(monkeypatch, lambda request: sent.append(request) or httpx.Response(500))
    assert cli.main(["stores", "create", "demo", "--dream-threshold", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 400 invalid_input: stores.create: dream_threshold: ") and sent == []
    assert "(refused before sending)" in err and "Traceback" not in err
    assert cli.main(["--json", "stores", "create", "demo", "--dream-threshold", "2"]) == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "invalid_input"


def test_a_messages_file_that_is_not_json_is_a_usage_error(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _fake(monkeypatch, lambda request: httpx.Response(500))
    (tmp_path / "m.json").write_text("[{oops")
    for path in (tmp_path / "m.json", tmp_path / "missing.json"):
        assert cli.main(["add", "demo", "--app", "a", "--messages", str(path)]) == cli.EXIT_USAGE
        assert f"--messages {path}: " in capsys.readouterr().err


def test_a_reader_that_stops_early_ends_the_output_without_a_traceback(tmp_path: Any) -> None:
    """A trial (session 30): `memlane ... --json | head` ended in a BrokenPipeError traceback, exit 1."""
    import os
    import subprocess
    import sys

    script = tmp_path / "flood.py"
    script.write_text("import sys\nfrom memlane import cli\n"
                      "def flood(args):\n    for i in range(300000):\n        print(f'line {i}')\n    return 0\n"
                      "cli._call = flood\nsys.exit(cli.main(['--url', 'http://127.0.0.1:9', 'stores', 'list']))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    reader = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader.stdout is not None and reader.stdout.readline() == b"line 0\n"
    reader.stdout.close()  # as `head -1` does
    _, err = reader.communicate(timeout=60)
    assert reader.returncode == 0 and b"Traceback" not in err, err.decode()[-500:]
