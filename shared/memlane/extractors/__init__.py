"""Extractors turn a task's messages into candidate memories: an LLM one and a deterministic one."""

from __future__ import annotations

from typing import Protocol, Sequence

from ..domain.models import Candidate, Message


class Extractor(Protocol):
    def extract(self, messages: Sequence[Message], *, instructions: str = "") -> list[Candidate]: ...
