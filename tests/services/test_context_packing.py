"""The context card's packing with the memories it may leave out (services/context._packed), over random cards:
a memory is left out for repeating the card's turns or summary only if the card shows them whole (session 21's
trials: a sentence shortened, or one dropped while another of the same count came in, hid memories silently)."""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from memlane.domain.models import Memory, MemoryType, Message, SummarySentence, ThreadSummary
from memlane.domain.scope import Scope
from memlane.policies.context_card import Entry, Section
from memlane.services import context
from memlane.services.search import SearchHit

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
SC = Scope(app_id="a", tenant_id="t", agent_id="g", run_id="r")
VOCAB = ("peanut allergy vegetarian lisbon hotel bathtub daughter nora seven flying april quiet meat dinner "
         "restaurant museum pottery jazz records sister cousin baker city ferry tram tickets river weather").split()


class WordTok:
    name = "words"
    def count(self, t): return len(t.split())
    def count_many(self, ts): return [len(t.split()) for t in ts]


def _sentence(rng, n):
    return " ".join(rng.choice(VOCAB) for _ in range(n)) + "."


def scenario(rng):
    nturns = rng.randint(0, 12)
    msgs = []
    for i in range(nturns):
        content = " ".join(_sentence(rng, rng.randint(2, 12)) for _ in range(rng.randint(1, 4)))
        msgs.append(Message(message_id=f"m{i:03d}", scope=SC, role=rng.choice(["user", "assistant"]),
                            content=content, created_at=T0 + timedelta(minutes=i), request_id="rq"))
    recent_n = rng.randint(0, nturns) if nturns else 0
    recent = msgs[-recent_n:] if recent_n else []
    parts = []
    if rng.random() < 0.5:
        parts.append(Section("user_profile", tuple(Entry(str(i), _sentence(rng, 4), 1.0, i) for i in range(rng.randint(0, 3)))))
    if rng.random() < 0.6 and msgs:
        ss = []
        for i in range(rng.randint(1, 5)):
            ev = tuple(m.message_id for m in rng.sample(msgs, rng.randint(1, min(3, len(msgs)))))
            ss.append(Entry(f"s{i}", " ".join(_sentence(rng, rng.randint(3, 10)) for _ in range(rng.randint(1, 3))),
                            0.7, i, ev))
        parts.append(Section("summary", tuple(ss)))
    if recent:
        parts.append(Section("recent", tuple(
            Entry(m.message_id, context._said(m), max(0.5, 1.0 - 0.05 * age), len(recent) - age, (m.message_id,),
                  f"{m.created_at:%Y-%m-%d}") for age, m in enumerate(reversed(recent))), contiguous=True))
    hits = []
    for r in range(rng.randint(0, 15)):
        kind = rng.random()
        if kind < 0.4 and msgs:
            src = rng.choice(msgs)
            text = src.content if rng.random() < 0.5 else f"{src.role}: {src.content}"
            ev = [src.message_id]
        elif kind < 0.6 and msgs:
            ev = [rng.choice(msgs).message_id]
            text = _sentence(rng, rng.randint(3, 10))
        else:
            ev = []
            text = _sentence(rng, rng.randint(3, 10))
        mem = Memory(memory_id=f"mem{r:02d}", scope=SC, text=text, evidence=ev, created_at=T0, updated_at=T0,
                     observed_at=T0)
        hits.append((r, SearchHit(memory=mem, score=1.0, similarity=1.0)))
    budget = rng.choice([1, 2, 3, 5, 8, 13, 20, 30, 45, 60, 80, 120, 200, 400, 3000, rng.randint(1, 3000)])
    return parts, hits, recent, budget


def check(seed, plan):
    rng = random.Random(seed)
    parts, hits, recent, budget = scenario(rng)
    tok = WordTok()
    recalled = context._recalled({"memories"}, None, [], hits, recent, plan)
    card = context._packed(parts, recalled, budget, tok)
    card2 = context._packed(parts, recalled, budget, tok)
    problems = []
    if card.text != card2.text:
        problems.append("nondeterministic")
    if tok.count(card.text) > budget or card.total > budget:
        problems.append(f"over budget {card.total}>{budget}")
    keys = [e.key for e in card.kept.get("memories", ())]
    if len(keys) != len(set(keys)):
        problems.append("memory twice")
    # legitimate exclusion: only for what the card shows whole
    turns = {m.message_id: m for m in recent}
    orig = {(s.name, e.key, e.text) for s in parts for e in s.entries}
    whole = [e for n in ("summary", "recent") for e in card.kept.get(n, ()) if (n, e.key, e.text) in orig]
    shown = [context._turn(turns[e.key]) if e.key in turns else e.text for e in whole]
    covered = {ev for e in whole for ev in e.evidence}
    expected = {e.key for e in context._memories(hits, shown, covered, plan).entries}
    got = set(keys)
    memcut = sum(c.dropped for c in card.cut if c.section == "memories")
    missing = expected - got
    if len(missing) > memcut:
        problems.append(f"missing {sorted(missing)} cut={memcut}")
    return problems, card


def test_a_memory_is_left_out_only_for_what_the_card_shows_whole():
    """Random cards (turns, summary sentences, memories restating them, budgets 1-3,000): every memory search
    offered is in the card, or counted in `cut`, or repeats a turn or summary sentence the card shows whole — never
    one it cut or shortened. And the card is within its budget, the same twice, each memory once."""
    bad = [(name, seed, problems) for name in ("default", "dated_lines") for seed in range(3000)
           if (problems := check(seed, context.RECIPES[name])[0])]
    assert not bad, bad[:5]


def test_a_plan_comes_back_when_the_sentence_that_said_it_is_cut():
    """An open item the summary's sentence says is left out of the plans (the summary shows it), and the plan it
    says with it. When the budget then cuts that sentence, the item is offered in the plans again: in the card,
    or listed as cut — never lost without a word (here it does not fit either)."""
    item = "2025-01-01 User: I need to book the ferry to Madeira for the whole family next week."
    summary = ThreadSummary(scope=SC, created_at=T0, updated_at=T0, open_items=[item], cited={item: ["m1"]},
                            sentences=[SummarySentence(text="2025-01-01 User: We talked about the weather in Porto and "
                                                       "the long lines at the museum and many other small things.",
                                                       evidence=["m0"]), SummarySentence(text=item, evidence=["m1"])])
    ferry = Memory(memory_id="p1", scope=SC, memory_type=MemoryType.PLAN, evidence=["m1"], created_at=T0,
                   updated_at=T0, text="Book the ferry to Madeira for the whole family next week")
    parts = [Section("summary", tuple(Entry(f"s{i}", s.text, context.SUMMARY_VALUE, i, tuple(s.evidence))
                                      for i, s in enumerate(summary.sentences)))]
    recalled = context._recalled({"plans"}, summary, [(0, SearchHit(memory=ferry, score=1.0, similarity=1.0))], [],
                                 [], context.RECIPES["default"])
    card = context._packed(parts, recalled, 16, WordTok())
    assert not card.kept.get("summary")
    assert "Madeira" in card.text or any(c.section == "plans" and c.dropped for c in card.cut), card.cut
