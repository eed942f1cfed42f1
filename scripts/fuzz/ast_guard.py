"""Serialise `ast.parse` in the fuzzer's process on Python 3.11.

CPython 3.11 keeps the AST constructor's recursion counter in the interpreter, not the thread, so
two threads parsing at once can fail with `SystemError: AST constructor recursion depth mismatch`
(the 3.11 form of python/cpython#106905; 3.12 and later are not affected). schemathesis
`--workers 2` runs hypothesis on two threads, and hypothesis parses source files with `ast.parse`
to describe lambdas — a CI run failed on exactly that, with no fault in the API under test.
"""

from __future__ import annotations

import ast
import sys
import threading

_lock = threading.RLock()  # re-entrant: a finalizer run during a parse may parse again


def install() -> bool:
    """Wrap `ast.parse` with a process-wide lock where the interpreter needs it; True if it did."""
    if sys.version_info >= (3, 12) or getattr(ast.parse, "_memlane_serialised", False):
        return False
    unguarded = ast.parse

    def parse(*args, **kwargs):
        with _lock:
            return unguarded(*args, **kwargs)

    parse._memlane_serialised = True  # type: ignore[attr-defined]
    ast.parse = parse
    return True
