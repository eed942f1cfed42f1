"""Thread summary with an LLM: the previous summary and the new messages in, the new summary out.

The previous summary's sentences are shown numbered [p1], [p2], ..., its open items [o1], ... and its
decisions [d1], ...; the new messages [1], [2], ... with their time and speaker. The model answers with
those numbers, never with ids: each sentence, open item and decision cites the messages it comes from
(`messages`) and/or what of the previous summary it keeps (`previous`: a sentence's [pN], an open item's
[oN], a decision's [dN]). `resolve` accepts an answer only if every number was shown and every part cites
something, and says what is wrong otherwise (for the one repair turn).
"""

from pydantic import BaseModel, ConfigDict, Field

SYSTEM = """You maintain the rolling summary of one conversation between a user and an AI assistant.
You receive the PREVIOUS summary, its sentences numbered [p1], [p2], ..., and the NEW messages since
it, numbered [1], [2], ..., each with the date it was said and its speaker. Write the updated summary:
- short, factual, third-person sentences in the order things happened; keep dates and numbers exact;
- keep what still matters from the previous summary (cite it in `previous`), condense or drop the rest;
- every sentence cites the new messages it comes from (`messages`) and/or the previous sentences it
  keeps (`previous`); cite only numbers that were shown;
- `open_items`: goals, questions and plans still open, the previous ones ([o1], ...) kept while they are
  (cite them in `previous`); `decisions`: what was decided or agreed, the previous ones ([d1], ...) kept;
  each item cites the new messages it comes from and/or the previous item it keeps.
Stay within the token limit given. Answer with JSON only, matching the schema."""

TEMPLATE = """Previous summary (number, sentence):
{previous}

Previous open items:
{open_items}

Previous decisions:
{decisions}

New messages (number, date, speaker: text):
{messages}

Write the updated summary in at most {cap} tokens."""

REPAIR = """Your answer could not be used:
{errors}
Answer again, citing only the numbers shown and staying within {cap} tokens."""


class Sentence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=600)
    messages: list[int] = Field(default_factory=list, max_length=50,
                                description="numbers of the new messages it comes from: 3 for [3]")
    previous: list[int] = Field(default_factory=list, max_length=50,
                                description="numbers of the previous sentences it keeps: 2 for [p2]")


class Item(Sentence):
    """An open item or a decision: cited as a sentence is, its `previous` numbering the previous items."""

    text: str = Field(min_length=1, max_length=300)
    previous: list[int] = Field(default_factory=list, max_length=10,
                                description="numbers of the previous items it keeps: 2 for [o2] (or [d2])")


class SummaryAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sentences: list[Sentence] = Field(max_length=60)
    open_items: list[Item] = Field(default_factory=list, max_length=10)
    decisions: list[Item] = Field(default_factory=list, max_length=10)


def resolve(answer: SummaryAnswer, *, messages: int, previous: int, open_items: int = 0,
            decisions: int = 0) -> list[str]:
    """What is wrong with `answer`, given how many new messages and previous sentences, open items and
    decisions were shown."""
    errors = []
    for kind, mark, parts, shown in (("sentence", "p", answer.sentences, previous),
                                     ("open item", "o", answer.open_items, open_items),
                                     ("decision", "d", answer.decisions, decisions)):
        for n, s in enumerate(parts, start=1):
            if not s.messages and not s.previous:
                errors.append(f"{kind} {n} cites nothing")
            bad = [f"[{m}]" for m in s.messages if not 1 <= m <= messages]
            bad += [f"[{mark}{p}]" for p in s.previous if not 1 <= p <= shown]
            if bad:
                errors.append(f"{kind} {n} cites {', '.join(bad)}, which were not shown")
    if not answer.sentences and messages:
        errors.append("the summary has no sentence")
    return errors
