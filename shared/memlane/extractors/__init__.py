"""Extractors turn a task's messages into candidate memories: an LLM one and a deterministic one."""

from __future__ import annotations

from typing import Collection, Protocol, Sequence

from ..domain.models import DEFAULT_EXTRACT_ROLES, Candidate, Message


class Extractor(Protocol):
    def extract(self, messages: Sequence[Message], *, context: Sequence[Message] = (), instructions: str = "",
                keywords_from_assistant: bool = False,
                roles: Collection[str] = DEFAULT_EXTRACT_ROLES) -> list[Candidate]:
        """Candidates from `messages` (one add's), each citing at least one of them as evidence.

        `context`: the run's messages just before them, oldest first. They inform the new ones (a
        question a reply answers, a statement a "yes" confirms, who "she" is, which day is meant) and
        may be cited beside a new message the memory is built from, but give no memory of their own:
        their own add extracted them. `roles`: whose turns are extracted (domain ExtractRole; a
        document always is). Hidden keywords: words of the memory's own evidence and of its speaker's
        turns only; the assistant's turns lend words only when `keywords_from_assistant`."""
        ...
