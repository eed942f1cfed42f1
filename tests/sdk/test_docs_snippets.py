"""The Python snippets a newcomer pastes — docs/sdk.md's first, then the README's — run as written against
a real `memlane serve` (only the URL is pointed at this test's server)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest

from ..e2e.conftest import Server

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _python_blocks(doc: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(Path(tmp_path_factory.mktemp("docs")) / "data").start()
    yield srv
    srv.stop()


def test_the_sdk_page_then_the_readme_snippet_run(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    first = _python_blocks(ROOT / "docs" / "sdk.md")[0]
    readme = next(block for block in _python_blocks(ROOT / "README.md") if "memlane.sdk" in block)
    for snippet in (first, readme):
        exec(compile(snippet.replace("http://127.0.0.1:8420", server.url), "snippet", "exec"), {})
    out = capsys.readouterr().out
    assert "vegetarian" in out and "peanuts" in out
