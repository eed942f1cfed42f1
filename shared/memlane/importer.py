"""`memlane import FILE.jsonl --store S`: a file of adds, one JSON add body per line, each with its request_id.

Lines go in batches through POST /v1/stores/{store}/memories:batch. Each line's request_id makes sending it
again a replay (nothing written twice), so an import that stopped — a crash, a lost connection, a Ctrl-C — is
resumed by running it again on the same file. A line is refused with its number (not JSON, no request_id, or
a 4xx from the service); an add that failed for a passing reason (429/5xx) is sent again a few times with
backoff, then counted as failed.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from .domain.errors import InvalidInput
from .domain.limits import MAX_ADDS_PER_BATCH
from .domain.validation import one_of_each, refuse_constant

# (method, path, body) -> (status, JSON answer, an error's included): sent once, this module decides what to retry
Send = Callable[[str, str, "dict[str, Any] | None"], "tuple[int, Any]"]
RETRIES = 4


@dataclass(frozen=True)
class Refusal:
    line: int
    code: str
    message: str


@dataclass
class ImportReport:
    lines: int = 0  # non-blank lines read
    accepted: int = 0
    replayed: int = 0
    refused: int = 0
    failed: int = 0  # still failing (429/5xx) after the retries: run the import again
    refusals: list[Refusal] = field(default_factory=list)  # refused and failed lines, by line number

    @property
    def complete(self) -> bool:
        return self.refused == 0 and self.failed == 0


class ImportAborted(Exception):
    """The service refused a whole batch (not an add of it): no grant, an unknown route, a bad request."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def import_file(send: Send, store: str, path: Path, *, batch_size: int = MAX_ADDS_PER_BATCH,
                progress: Callable[[ImportReport], None] | None = None,
                sleep: Callable[[float], None] = time.sleep) -> ImportReport:
    """Send every line of `path` to `store`; `progress` is called after each batch."""
    report = ImportReport()
    route = f"/v1/stores/{quote(store, safe='')}/memories:batch"
    batch: list[tuple[int, dict[str, Any]]] = []

    def flush() -> None:
        _send(send, route, batch, report, sleep)
        batch.clear()
        if progress is not None:
            progress(report)

    with open(path, encoding="utf-8-sig") as lines:  # a byte order mark before the first line is no part of it
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            report.lines += 1
            add = _parse(number, text, report)
            if add is not None:
                batch.append((number, add))
            if len(batch) >= batch_size:
                flush()
    flush()
    report.refusals.sort(key=lambda r: r.line)
    return report


def _parse(number: int, text: str, report: ImportReport) -> dict[str, Any] | None:
    try:  # as the routes read a body: a key twice, NaN and a nesting too deep for the parser are refused
        add = json.loads(text, object_pairs_hook=one_of_each, parse_constant=refuse_constant)
    except InvalidInput as error:
        _refuse(report, number, error.code, error.message)
        return None
    except json.JSONDecodeError as error:  # its position in this line ("line 2" would point at the file's second)
        _refuse(report, number, "invalid_json", f"not JSON: {error.msg} (at character {error.pos + 1})")
        return None
    except (ValueError, RecursionError) as error:
        _refuse(report, number, "invalid_json", f"not JSON: {str(error)[:200]}")
        return None
    if not isinstance(add, dict):
        _refuse(report, number, "invalid_input", "a line is one add: a JSON object")
    elif not isinstance(add.get("request_id"), str) or not add["request_id"]:
        _refuse(report, number, "request_id_required", "each line needs a request_id (it makes a re-run a replay)")
    else:
        return add
    return None


def _refuse(report: ImportReport, number: int, code: str, message: str) -> None:
    report.refused += 1
    report.refusals.append(Refusal(number, code, message))


def _send(send: Send, route: str, batch: list[tuple[int, dict[str, Any]]], report: ImportReport,
          sleep: Callable[[float], None]) -> None:
    pending = list(batch)
    for attempt in range(RETRIES + 1):
        if not pending:
            return
        status, payload = send("POST", route, {"adds": [add for _, add in pending]})
        if status == 413 and len(pending) > 1:  # the body is too large for the service: send it in halves
            half = len(pending) // 2
            _send(send, route, pending[:half], report, sleep)
            _send(send, route, pending[half:], report, sleep)
            return
        if status != 200:
            error = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
            code, message = error.get("code", "error"), error.get("message", str(payload))
            if status == 429 or status >= 500:
                if attempt < RETRIES:
                    sleep(_backoff(attempt))
                    continue
                break
            if status == 413:  # one add alone is too large: that line is refused
                _refuse(report, pending[0][0], code, message)
                return
            raise ImportAborted(status, code, message)
        retry = []
        for (number, add), result in zip(pending, payload["results"]):
            if result["outcome"] in ("accepted", "replayed"):
                setattr(report, result["outcome"], getattr(report, result["outcome"]) + 1)
            elif result["outcome"] == "refused":
                _refuse(report, number, result["error"]["code"], result["error"]["message"])
            else:
                retry.append((number, add))
        pending = retry
        if pending and attempt < RETRIES:
            sleep(_backoff(attempt))
    for number, _ in pending:  # still failing: counted apart from refusals (run the import again)
        report.failed += 1
        report.refusals.append(Refusal(number, "failed", "the service kept failing this add; run the import again"))


def _backoff(attempt: int) -> float:
    return min(8.0, 0.5 * 2 ** attempt) * (0.5 + random.random() / 2)  # noqa: S311 — jitter, not a secret
