"""Request and response models of the context card route (api/routes/context.py)."""

from typing import Literal

from pydantic import Field

from ..domain import limits
from ..policies.context_card import SECTIONS, Card
from ..services import context
from .models import ApiModel, Strict

SectionName = Literal["agent_profile", "user_profile", "summary", "memories", "plans", "recent"]


class ContextIn(Strict):
    app_id: str = Field(max_length=256)
    tenant_id: str = Field(max_length=256)
    agent_id: str | None = Field(default=None, max_length=256)  # default: the agent the thread was held with
    query: str | None = Field(default=None, min_length=1, max_length=limits.MAX_QUERY_CHARS)
    budget_tokens: int = Field(default=context.DEFAULT_BUDGET, ge=context.MIN_BUDGET, le=context.MAX_BUDGET,
                               strict=True)
    recent_messages: int = Field(default=context.DEFAULT_RECENT, ge=0, le=context.MAX_RECENT, strict=True)
    sections: list[SectionName] | None = Field(default=None, max_length=6)  # default: every section
    # Where the memories and plans come from: the tenant's threads of every agent, or the thread's agent's alone
    # (a caller bound to one agent, as `memlane mcp --agent`; the user profile is then the stated one).
    recall_scope: Literal["tenant", "agent"] = "tenant"


class ContextEntryOut(ApiModel):
    id: str  # message id (recent), memory id (memories, plans), or the entry's place in its section
    text: str
    evidence: list[str] = Field(default_factory=list)  # message ids
    group: str | None = None  # the label `text` lists it under (a memory: its date), said once for its group


class ContextTokensOut(ApiModel):
    per_section: dict[str, int]
    total: int  # tokens of `text`, never more than the budget
    budget: int
    tokenizer: str


class ContextCutOut(ApiModel):
    section: str
    dropped: int  # entries left out for the budget
    truncated: int  # entries shortened to the sentences that fit


class ContextOut(ApiModel):
    sections: dict[str, list[ContextEntryOut]]
    text: str
    tokens: ContextTokensOut
    evidence: list[str]  # message ids of everything in the card
    cut: list[ContextCutOut]

    @classmethod
    def of(cls, card: Card) -> "ContextOut":
        # Every section, in render order, also one with nothing in it: one shape for every answer.
        return cls(sections={name: [ContextEntryOut(id=e.key, text=e.text, evidence=list(e.evidence),
                                                     group=e.group or None) for e in card.kept.get(name, ())]
                             for name in SECTIONS},
                   text=card.text,
                   tokens=ContextTokensOut(per_section=card.tokens, total=card.total, budget=card.budget,
                                           tokenizer=card.tokenizer),
                   evidence=list(card.evidence),
                   cut=[ContextCutOut(section=c.section, dropped=c.dropped, truncated=c.truncated) for c in card.cut])
