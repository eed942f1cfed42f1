"""The API fuzzer's guard against CPython 3.11's shared AST recursion counter (scripts/fuzz/ast_guard.py).

Several threads parse a module while the cyclic GC runs Python finalizers mid-parse (which
lets the GIL switch inside the AST constructor). Unguarded, Python 3.11.7 fails this within a few
parses with `SystemError: AST constructor recursion depth mismatch`; guarded, it must not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[2] / "scripts" / "fuzz"

RACE = r"""
import ast, gc, inspect, json, sys, threading, json.decoder as module
sys.path.insert(0, sys.argv[1])
import ast_guard
installed = ast_guard.install() if sys.argv[2] == "guarded" else False
source = open(inspect.getsourcefile(module)).read()
sys.setswitchinterval(1e-6)

class Finalized:
    def __del__(self):
        sum(range(50))

def churn(*_):
    garbage = [Finalized() for _ in range(50)]
    garbage.append(garbage)

gc.callbacks.append(churn)
gc.set_threshold(50, 1, 1)
errors = []

def parse_repeatedly():
    for _ in range(6):
        try:
            ast.parse(source)
        except SystemError as error:
            errors.append(str(error))
            return

threads = [threading.Thread(target=parse_repeatedly) for _ in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"installed": installed, "errors": errors}))
"""


def _race(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", RACE, str(FUZZ), mode], capture_output=True,
                          text=True, timeout=240, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the shared counter is a Python 3.11 defect")
def test_concurrent_parses_do_not_trip_the_recursion_counter_once_guarded():
    outcome = _race("guarded")
    assert outcome["installed"] is True
    assert outcome["errors"] == []


def test_the_fuzzer_hooks_install_the_guard_before_any_test_runs():
    hooks = (FUZZ / "hooks.py").read_text()
    assert "ast_guard.install()" in hooks
    assert hooks.index("ast_guard.install()") < hooks.index("@schemathesis.")
