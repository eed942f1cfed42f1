"""The CLI's global options go before or after the sub-command (`memlane serve --data-dir DIR --port N`,
the shape users type), and `memlane --version` prints the installed package's version."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from memlane import cli

from ..e2e.conftest import free_port


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"memlane {importlib.metadata.version('memlane')}"


@pytest.mark.parametrize("argv", [
    ["--data-dir", "/tmp/d", "--json", "--url", "http://h:1", "--api-key", "k", "stores", "list"],
    ["stores", "list", "--data-dir", "/tmp/d", "--json", "--url", "http://h:1", "--api-key", "k"],
    ["--json", "stores", "--url", "http://h:1", "list", "--data-dir", "/tmp/d", "--api-key", "k"],
])
def test_global_options_are_taken_before_and_after_the_sub_command(argv: list[str]) -> None:
    args = cli.parser().parse_args(argv)
    assert (args.command, args.data_dir, args.json, args.url, args.api_key) == \
        ("stores", Path("/tmp/d"), True, "http://h:1", "k")


def test_after_the_sub_command_wins_and_unset_ones_keep_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLANE_DATA_DIR", raising=False)
    args = cli.parser().parse_args(["--data-dir", "/tmp/first", "reindex", "demo", "--data-dir", "/tmp/second"])
    assert args.data_dir == Path("/tmp/second")
    args = cli.parser().parse_args(["serve", "--port", "9999"])
    assert (args.data_dir, args.json, args.local, args.port) == (Path(".memlane"), False, False, 9999)


def test_the_cli_talks_to_a_server_with_the_options_after_the_command(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`memlane serve --data-dir DIR --port N` starts; a command with `--url ... --json` after it reaches it."""
    port, data = free_port(), tmp_path / "data"
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "memlane.cli", "serve", "--data-dir", str(data), "--port",
                             str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read())
                break
            except OSError:
                time.sleep(0.1)
        assert health["status"] == "ok" and data.is_dir()
        url = f"http://127.0.0.1:{port}"
        assert cli.main(["stores", "create", "demo", "--url", url, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["name"] == "demo"
        assert cli.main(["stores", "list", "--json", "--url", url]) == 0
        assert [s["name"] for s in json.loads(capsys.readouterr().out)["stores"]] == ["demo"]  # the API's document
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_without_the_sdk_extra_serve_parses_and_client_commands_name_the_extra(tmp_path: Path) -> None:
    """The core install has no httpx: the CLI still loads (serve, operator commands, --version), and a client
    command says which extra to install and exits 5."""
    code = ("import sys; sys.modules['httpx'] = None\n"  # as if not installed
            "from memlane import cli\n"
            "assert cli.parser().parse_args(['serve', '--port', '1']).port == 1\n"
            "sys.exit(cli.main(['stores', 'list', '--url', 'http://127.0.0.1:9']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == cli.EXIT_MISSING_EXTRA, done.stderr
    assert "pip install 'memlane[sdk]'" in done.stderr
