"""The sample events under events/<function>/, shared by the handler tests and `sam local invoke -e`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(function: str, name: str) -> dict[str, Any]:
    """events/<function>/<name>.json, as a fresh dict a test may change."""
    return json.loads((EVENTS / function / f"{name}.json").read_text())


def with_body(event: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """An HTTP event with another JSON body (the rest — route, identity — kept)."""
    return {**event, "body": json.dumps(body)}
