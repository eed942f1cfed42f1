"""Successful interactions in a conversation, the raw material of skills.

An interaction is a user request, an assistant answer that gives steps (a numbered or bulleted
list, or "first ... then ..."), and a user reply that says it worked. The same kind of request
solved that way more than once is a reusable procedure: the dream engine emits it as a skill
(a memory of type procedure). Pure: messages in, interactions out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..domain.models import Message

_LIST_ITEM = re.compile(r"(?m)^\s*(?:\d+[.)]|[-*•]|step \d+[:.)]?)\s+(?P<step>\S.*)$", re.I)
_SEQUENCE = re.compile(r"\b(?:first|then|next|after that|afterwards|finally|lastly)\b,?\s*", re.I)
_SUCCESS = re.compile(
    r"\b(that worked|it worked|this worked|worked (?:perfectly|great|fine|like a charm)|works now|it'?s working( now)?|"
    r"that fixed it|fixed it|that did it|did the trick|solved|problem solved|that helped|perfect|"
    r"exactly what i needed|all good now|success)\b", re.I)
_FAILURE = re.compile(
    r"\b(didn'?t work|did not work|doesn'?t work|does not work|not working|still (?:broken|failing|fails|"
    r"doesn'?t)|same error|no luck|failed|isn'?t working)\b", re.I)
_ASK = re.compile(r"^(?:hi|hey|hello)?[,!\s]*(?:please\s+)?(?:can|could|would) you (?:help me |tell me how to |"
                  r"show me how to |explain how to )?|^(?:how (?:do|can|should|would) (?:i|we|you)|how to|"
                  r"help me|i need to|i want to|i'd like to|please)\s+", re.I)
MAX_STEPS = 12


@dataclass(frozen=True)
class Interaction:
    request: str  # what was asked, e.g. "reset my router"
    steps: tuple[str, ...]
    message_ids: tuple[str, ...]  # request, answer, confirmation
    message: Message  # the confirmation: its scope and time place the interaction


def steps_of(text: str) -> list[str]:
    items = [m.group("step").strip() for m in _LIST_ITEM.finditer(text)]
    if len(items) >= 2:
        return items[:MAX_STEPS]
    parts = [p.strip(" .;") for p in _SEQUENCE.split(text) if p.strip(" .;")]
    return parts[1:MAX_STEPS + 1] if len(parts) >= 3 else []  # parts[0] is what precedes "first"


def task_of(request: str) -> str:
    text = request.strip().rstrip("?!. ")
    stripped = _ASK.sub("", text, count=1).strip()
    return stripped or text


def interactions(messages: Sequence[Message]) -> list[Interaction]:
    """Request → steps → "that worked" triples, in the order of the conversation."""
    out: list[Interaction] = []
    for i in range(len(messages) - 2):
        ask, answer, reply = messages[i], messages[i + 1], messages[i + 2]
        if ask.role != "user" or answer.role != "assistant" or reply.role != "user":
            continue
        if _SUCCESS.search(ask.content) or not _SUCCESS.search(reply.content) or _FAILURE.search(reply.content):
            continue
        steps = steps_of(answer.content)
        if len(steps) < 2:
            continue
        out.append(Interaction(request=task_of(ask.content)[:300], steps=tuple(s[:300] for s in steps),
                               message_ids=(ask.message_id, answer.message_id, reply.message_id), message=reply))
    return out


def skill_text(task: str, steps: Sequence[str]) -> str:
    numbered = " ".join(f"{i}. {s.rstrip('.')}." for i, s in enumerate(steps, start=1))
    return f"How to {task}: {numbered}"
