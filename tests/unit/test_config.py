"""Settings from the environment: a value that is not valid is named, with what it should be — the command
says so in one line and stops, without a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import cli
from memlane.bootstrap import Misconfigured
from memlane.config import Settings


def test_an_invalid_setting_is_named_with_its_value_and_what_it_should_be() -> None:
    with pytest.raises(Misconfigured) as raised:
        Settings.from_env(env={"MEMLANE_ANN_MIN_ROWS": "abc", "MEMLANE_OPENSEARCH_REPLICAS": "-1"})
    message = str(raised.value)
    assert "MEMLANE_ANN_MIN_ROWS='abc'" in message and "integer" in message
    assert "MEMLANE_OPENSEARCH_REPLICAS='-1'" in message and "greater than or equal to 0" in message


def test_a_setting_given_as_an_option_is_named_as_the_option(tmp_path: Path) -> None:
    with pytest.raises(Misconfigured, match="port=-5"):
        Settings.from_env(env={}, data_dir=str(tmp_path), port=-5)


@pytest.mark.parametrize("argv", [["stores", "list", "--local"], ["serve", "--port", "0"], ["worker"]])
def test_the_cli_says_which_setting_is_wrong_in_one_line(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMLANE_ANN_MIN_ROWS", "abc")
    assert cli.main(argv) == cli.EXIT_MISSING_EXTRA
    err = capsys.readouterr().err
    assert "MEMLANE_ANN_MIN_ROWS='abc'" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing started, nothing written
