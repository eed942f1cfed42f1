"""The LLM extractor: the store's extract_instructions plus the transcript, structured output."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Collection, Sequence

from ..domain.models import DEFAULT_EXTRACT_ROLES, Candidate, ExtractRole, Message
from ..domain.deadline import Deadline
from ..domain.validation import says_something
from ..ports import LLM, Budgeted
from ..prompts import extract as prompt
from .rules import speaker_of


class LLMExtractor:
    def __init__(self, llm: LLM):
        self.llm = llm

    def within(self, deadline: Deadline) -> "LLMExtractor":
        """This extractor with its model calls bounded by `deadline` (ports.Budgeted)."""
        return LLMExtractor(self.llm.within(deadline)) if isinstance(self.llm, Budgeted) else self

    def extract(self, messages: Sequence[Message], *, context: Sequence[Message] = (), instructions: str = "",
                keywords_from_assistant: bool = False,
                roles: Collection[str] = DEFAULT_EXTRACT_ROLES) -> list[Candidate]:
        # The new messages are numbered 0, 1, ... as they always were; the earlier ones count back from
        # the add (-1 is the message just before it), so their numbers cannot be taken for new ones.
        timeline = [*context, *messages]
        first = len(context)
        lines = [f"[{i - first}] {m.created_at:%Y-%m-%d %H:%M} {speaker_of(m)}: {m.content}"
                 for i, m in enumerate(timeline)]
        earlier = prompt.CONTEXT_TEMPLATE.format(transcript="\n".join(lines[:first])) if first else ""
        extra = f"Store instructions:\n{instructions}\n\n" if instructions else ""
        result = self.llm.generate(
            system=prompt.SYSTEM,
            prompt=prompt.USER_TEMPLATE.format(instructions=extra, roles=prompt.roles_line(roles), context=earlier,
                                               transcript="\n".join(lines[first:])),
            response_model=prompt.ExtractionResult,
        )
        # A memory must stand on a new message of a role the store extracts (a confirmation is the user's).
        kinds = {"document", *(r for r in ("user", "assistant") if r in roles)}
        if ExtractRole.ASSISTANT_CONFIRMED in roles:
            kinds.add("user")
        out: list[Candidate] = []
        for item in result.memories:
            cited = sorted({n + first for n in item.evidence if -first <= n < len(messages)}) \
                or list(range(first, len(timeline)))
            if not any(i >= first and timeline[i].role in kinds for i in cited) or not says_something(item.text):
                continue  # from the context alone (extracted by its own add), from a role not extracted, or blank
            out.append(Candidate(
                text=item.text.strip(),
                memory_type=item.memory_type,
                evidence=[timeline[i].message_id for i in cited],
                event_time=_parse_time(item.event_time),
                # The names of who said its evidence: findable, never shown, deleted with them.
                keywords=" ".join(dict.fromkeys(speaker_of(timeline[i]) for i in cited
                                                if timeline[i].role != "assistant" or keywords_from_assistant)),
                importance=item.importance,
            ))
        return out


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        # Past year 9999 or before year 1 in UTC ("9999-12-31T23:59:59-14:00"): the index and the API cannot hold it
        # (a trial: the add answered 500 with its memories in the table and not the index, and fsck --repair died).
        parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None  # an unparseable time is dropped, the memory is kept
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
