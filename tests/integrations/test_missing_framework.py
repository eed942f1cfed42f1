"""Importing an integration without its framework installed says which extra brings it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(("module", "framework", "extra"), [("langgraph", "langgraph", "langgraph"),
                                                            ("strands", "strands", "strands"),
                                                            ("strands", "strands.hooks", "strands")])
def test_importing_an_integration_without_its_framework_names_the_extra(module: str, framework: str,
                                                                       extra: str) -> None:
    """A trial: `import memlane.integrations.strands` without strands-agents installed ended in a bare
    ModuleNotFoundError ("No module named 'strands'"), which names no way to get it."""
    code = (f"import sys; sys.modules[{framework!r}] = None\n"  # as if the extra were not installed
            "try:\n"
            f"    import memlane.integrations.{module}\n"
            "except ModuleNotFoundError as missing:\n"
            "    print(type(missing).__name__, missing.name.split('.')[0], '|', missing)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ModuleNotFoundError {extra} |"), done.stdout  # the missing one, by its name
    assert f"pip install 'memlane[{extra}]'" in done.stdout
