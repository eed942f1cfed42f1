"""Framework integrations over the SDK (docs/integrations.md): `memlane.integrations.langgraph`
(`pip install 'memlane[langgraph]'`) and `memlane.integrations.strands` (`pip install 'memlane[strands]'`).

Nothing here is imported by `import memlane`: each module needs its framework installed, and says which extra
brings it when it is not."""

from __future__ import annotations

import re

from ..domain.limits import MAX_QUERY_CHARS

_FIRST_WORD = re.compile(r"\s+(?=\S)")


def bounded_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """A search query of at most `limit` characters (the API's limit: a longer one is refused, and a trial's agent
    call failed with it): a longer text's end, from its first whole word. The end, because a long message pastes
    first and asks last ("Here is the menu: ... Which dishes are safe?")."""
    if len(text) <= limit:
        return text
    kept = text.rstrip()  # trailing blanks would leave nothing to search for
    tail = kept[-limit:]
    if len(tail) < len(kept) and not (kept[-len(tail) - 1].isspace() or tail[0].isspace()):
        starts = _FIRST_WORD.search(tail)  # cut inside a word: start at the next one, if any
        if starts is not None:
            tail = tail[starts.end():]
    return tail.strip()


def missing_framework(missing: ModuleNotFoundError, extra: str) -> ModuleNotFoundError:
    """The error of importing an integration without its framework: it names the extra to install (a trial got a bare
    "No module named 'strands'")."""
    return ModuleNotFoundError(f"{missing} — memlane.integrations.{extra} needs its framework: "
                               f"pip install 'memlane[{extra}]'", name=missing.name)
