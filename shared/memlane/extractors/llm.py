"""The LLM extractor: the store's extract_instructions plus the transcript, structured output."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Sequence

from ..domain.models import Candidate, Message
from ..ports import LLM
from ..prompts import extract as prompt
from .rules import speaker_of


class LLMExtractor:
    def __init__(self, llm: LLM):
        self.llm = llm

    def extract(self, messages: Sequence[Message], *, instructions: str = "",
                keywords_from_assistant: bool = False) -> list[Candidate]:
        transcript = "\n".join(
            f"[{i}] {m.created_at:%Y-%m-%d %H:%M} {speaker_of(m)}: {m.content}" for i, m in enumerate(messages)
        )
        extra = f"Store instructions:\n{instructions}\n\n" if instructions else ""
        result = self.llm.generate(
            system=prompt.SYSTEM,
            prompt=prompt.USER_TEMPLATE.format(instructions=extra, transcript=transcript),
            response_model=prompt.ExtractionResult,
        )
        out: list[Candidate] = []
        for item in result.memories:
            cited = [messages[i] for i in item.evidence if 0 <= i < len(messages)] or list(messages)
            out.append(Candidate(
                text=item.text.strip(),
                memory_type=item.memory_type,
                evidence=[m.message_id for m in cited],
                event_time=_parse_time(item.event_time),
                # The names of who said its evidence: findable, never shown, deleted with them.
                keywords=" ".join(dict.fromkeys(speaker_of(m) for m in cited
                                                if m.role != "assistant" or keywords_from_assistant)),
                importance=item.importance,
            ))
        return out


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None  # an unparseable time is dropped, the memory is kept
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
