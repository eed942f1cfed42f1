"""Extractors turn a task's messages into candidate memories: an LLM one and a deterministic one."""

from __future__ import annotations

from typing import Protocol, Sequence

from ..domain.models import Candidate, Message


class Extractor(Protocol):
    def extract(self, messages: Sequence[Message], *, instructions: str = "",
                keywords_from_assistant: bool = False) -> list[Candidate]:
        """Candidates with their hidden keywords: words of the memory's own evidence and of its
        speaker's turns only; the assistant's turns lend words only when `keywords_from_assistant`."""
        ...
