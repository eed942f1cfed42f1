"""`memlane mcp`'s command line: listed with the other commands, and a clear exit when the extra is missing."""

from __future__ import annotations

import sys

import pytest

from memlane import cli


def test_mcp_is_a_command_with_its_scope_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["mcp", "--help"])
    usage = capsys.readouterr().out
    for option in ("--store", "--app", "--tenant", "--agent", "--http", "--local", "--api-key", "--sigv4"):
        assert option in usage
    assert cli.main(["mcp", "--store", "s", "--app", "a"]) == cli.EXIT_USAGE  # no tenant: the scope must be whole


def test_without_the_mcp_extra_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server", None)  # as if `mcp` were not installed
    monkeypatch.delitem(sys.modules, "memlane.mcp.server", raising=False)
    assert cli.main(["mcp", "--store", "s", "--app", "a", "--tenant", "t"]) == cli.EXIT_MISSING_EXTRA
    assert "pip install 'memlane[mcp]'" in capsys.readouterr().err
