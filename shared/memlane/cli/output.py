"""What the CLI prints: the API's JSON unchanged with `--json`, else aligned tables; errors on stderr."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import datetime
from enum import Enum
from typing import Any, Callable, Sequence

MARK = "…"  # ends a cell cut to fit
Column = tuple[str, Callable[[Any], Any]]  # header, value of a row


def jsonable(value: Any) -> Any:
    """An SDK answer as the API sent it: a model dumps only the fields its JSON had (exclude_unset), so no
    default the server left out is invented here."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def emit(args: argparse.Namespace, value: Any, human: str | Callable[[], str]) -> None:
    """One JSON document on stdout with --json, else the human rendering."""
    if args.json:
        print(json.dumps(jsonable(value), indent=2, ensure_ascii=False))
    else:
        print(human() if callable(human) else human)


def plain(value: Any) -> str:
    """A value as a person reads it: enums by value, lists joined, times to the second, nothing as ''."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value)
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, datetime):
        return when(value)
    return str(value)


def cut(text: Any, width: int) -> str:
    """One line of at most `width` characters; a longer text ends with the marker."""
    line = " ".join(plain(text).split())
    return line if len(line) <= width else line[:max(width - len(MARK), 0)] + MARK


PIPED_WIDTH = 160  # a pipe or a file has no width: the same lines whatever terminal (or none) ran it


def terminal_width() -> int:
    return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns if sys.stdout.isatty() else PIPED_WIDTH


def table(rows: Sequence[Any], columns: Sequence[Column], *, empty: str = "(none)", width: int | None = None) -> str:
    """Aligned columns under their headers; the last column takes what the terminal (a pipe: PIPED_WIDTH) has
    left and is cut with the marker past it (the others are short: ids, statuses, times)."""
    if not rows:
        return empty
    width = width or terminal_width()
    cells = [[cut(get(row), 10_000) for _, get in columns] for row in rows]
    headers = [header for header, _ in columns]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    room = width - sum(w + 2 for w in widths[:-1])
    widths[-1] = max(min(widths[-1], room), 20)
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(cut(c, w).ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def next_page(page: Any) -> str:
    """Under a page's table: how to ask for the next page, when there is one."""
    return f"\nnext: --cursor {page.next_cursor}" if getattr(page, "next_cursor", None) else ""


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """One `name: value` line per field (a single record), names aligned."""
    pad = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(pad)}  {plain(value) or '-'}" for name, value in pairs)


def when(value: Any) -> str:
    """A time to the second, UTC as the API gives it."""
    text = value.isoformat() if hasattr(value, "isoformat") else str(value or "")
    return text[:19].replace("T", " ")


def error(args: argparse.Namespace, text: str, **document: Any) -> None:
    """On stderr: `error: ...`, or with --json the error as a JSON document ({"error": {...}})."""
    if getattr(args, "json", False) and document:
        print(json.dumps({"error": document}, ensure_ascii=False), file=sys.stderr)
    else:
        print(f"error: {text}", file=sys.stderr)
