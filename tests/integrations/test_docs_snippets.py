"""docs/integrations.md's newcomer snippets run as written against a real `memlane serve`: only the URL is
pointed at this test's server and, for Strands, the model (Bedrock by default) is a scripted one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_strands_memory import ScriptedModel

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "integrations.md").read_text(), flags=re.S)


def test_the_langgraph_snippet_runs(memlane_server, capsys: pytest.CaptureFixture[str]) -> None:
    snippet = next(b for b in _python_blocks() if "memlane.integrations.langgraph" in b)
    exec(compile(snippet.replace("http://127.0.0.1:8420", memlane_server.url), "snippet", "exec"), {})
    out = capsys.readouterr().out
    assert "{'text': 'Alice is vegetarian.'}" in out and "diet Alice is vegetarian." in out
    assert "('memories', 'preferences')" in out


def test_the_strands_snippet_runs(memlane_server) -> None:
    snippet = next(b for b in _python_blocks() if "memlane.integrations.strands" in b)
    model = ScriptedModel([lambda _: ("tool", "remember", {"text": "Alice is vegetarian."}),
                           lambda _: ("text", "Noted.")] * 3)
    assert "Agent(tools=" in snippet
    snippet = snippet.replace("http://127.0.0.1:8420", memlane_server.url).replace(
        "Agent(tools=", "Agent(model=_model, callback_handler=None, tools=")
    scope = {"_model": model}
    exec(compile(snippet, "snippet", "exec"), scope)
    assert "vegetarian" in scope["memory"].recall("diet")
