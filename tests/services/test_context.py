"""The context card service (services/context.py): a thread's card through the real local path."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlane.adapters.tokenizers.hf import HFTokenizer
from memlane.domain.errors import InvalidInput, NotFound
from memlane.domain.models import AccessPolicy, Memory, MemoryType, SummarySentence, ThreadSummary
from memlane.domain.scope import Scope
from memlane.services import context, ingest, scopes, stores

APP, TENANT = "travel", "priya"
OLD = {"app_id": APP, "tenant_id": TENANT, "agent_id": "planner", "run_id": "thread-1"}
NEW = {**OLD, "run_id": "thread-2"}

FIRST_THREAD = ["I have a severe peanut allergy, so I always carry an EpiPen.",
                "I am vegetarian and I never eat meat.",
                "My sister Anjali loves pottery and old jazz records."]
SECOND_THREAD = [("user", "Hi again! I just landed in Lisbon."),
                 ("assistant", "Welcome to Lisbon! How can I help today?"),
                 ("user", "I want to book a table for dinner tonight somewhere nice.")]


@pytest.fixture()
def store(service, deps) -> str:
    name = stores.create(deps, name="cards").name
    ingest.add(deps, name, scope=OLD, messages=[{"role": "user", "name": "Priya", "content": t} for t in FIRST_THREAD])
    ingest.add(deps, name, scope=NEW, messages=[{"role": r, "content": c} for r, c in SECOND_THREAD])
    # another tenant's data, which no card of Priya may show
    ingest.add(deps, name, scope={**OLD, "tenant_id": "bob"},
               messages=[{"role": "user", "content": "I have a severe peanut allergy and I love steak."}])
    service.drain()
    return name


def card(deps, store, **kw):
    return context.build(deps, store, app_id=APP, tenant_id=TENANT, thread_id=kw.pop("thread_id", "thread-2"),
                         **kw)


def test_card_of_a_new_thread_recalls_the_first_one_and_holds_the_recent_turns(deps, store) -> None:
    result = card(deps, store)

    memories = [e.text for e in result.kept["memories"]]
    assert any("peanut allergy" in t for t in memories) and any("vegetarian" in t for t in memories)
    assert [e.text for e in result.kept["recent"]][-1].endswith(SECOND_THREAD[-1][1])
    assert "steak" not in result.text  # another tenant's memory
    assert HFTokenizer().count(result.text) == result.total <= 1500 and result.tokenizer == "hf:all-minilm-l6-v2"
    thread_messages = {m.message_id for m in deps.repo.list_messages(store, Scope(**NEW), limit=10, cursor=None)[0]}
    assert thread_messages <= set(result.evidence)
    allergy = next(e for e in result.kept["memories"] if "peanut" in e.text)
    assert allergy.evidence and set(allergy.evidence) <= set(result.evidence)


def test_the_same_state_renders_the_same_bytes(deps, store) -> None:
    assert card(deps, store).text.encode() == card(deps, store).text.encode()


def test_a_small_budget_is_never_exceeded_and_the_cut_is_reported(deps, store) -> None:
    result = card(deps, store, budget_tokens=40)
    assert result.total <= 40
    assert result.cut and all(c.dropped or c.truncated for c in result.cut)


def test_memories_do_not_repeat_the_recent_turns(deps, store) -> None:
    # the first thread's own card: its memories come from the very turns shown as recent
    result = card(deps, store, thread_id="thread-1", query="peanut allergy and food")
    recent = {e.key for e in result.kept["recent"]}
    assert recent and not any(set(e.evidence) <= recent for e in result.kept.get("memories", ()))


def test_the_summary_is_shown_with_its_citations_and_not_repeated_by_memories(deps, store, monkeypatch) -> None:
    first = deps.repo.list_messages(store, Scope(**OLD), limit=10, cursor=None)[0]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    summary = ThreadSummary(scope=Scope(**OLD), created_at=now, updated_at=now, sentences=[
        SummarySentence(text="Priya has a severe peanut allergy and carries an EpiPen.", evidence=[first[0].message_id])],
        open_items=["Find a pottery class for Anjali's birthday."])
    monkeypatch.setattr(context, "get_summary", lambda deps, store, scope: summary if scope.run_id == "thread-1" else None)

    result = card(deps, store, thread_id="thread-1", query="peanut allergy", recent_messages=0)

    assert [e.text for e in result.kept["summary"]] == [summary.sentences[0].text]
    assert first[0].message_id in result.evidence
    assert not any("peanut" in e.text for e in result.kept.get("memories", ()))
    assert any("pottery class" in e.text for e in result.kept["plans"])


def test_a_summary_sentence_of_turns_shown_as_recent_is_not_said_twice(deps, store, monkeypatch) -> None:
    """A working-memory trial: asked for more recent turns than the store keeps out of its summary, a card showed the
    same turns as summary sentences and again word for word (a quarter of its tokens)."""
    first = deps.repo.list_messages(store, Scope(**OLD), limit=10, cursor=None)[0]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    summary = ThreadSummary(scope=Scope(**OLD), created_at=now, updated_at=now, sentences=[
        SummarySentence(text="Priya has a severe peanut allergy and carries an EpiPen.", evidence=[first[0].message_id]),
        SummarySentence(text="Priya mentioned earlier trips to Porto.", evidence=["some-older-message"])])
    monkeypatch.setattr(context, "get_summary", lambda deps, store, scope: summary if scope.run_id == "thread-1" else None)

    result = card(deps, store, thread_id="thread-1", recent_messages=len(first))

    assert first[0].message_id in {e.key for e in result.kept["recent"]}
    assert [e.text for e in result.kept["summary"]] == ["Priya mentioned earlier trips to Porto."]


def _plan(deps, store, text: str, when: datetime | None) -> None:
    now = deps.clock.now()
    memory = Memory(memory_id=f"plan-{abs(hash(text))}", scope=Scope(**OLD), memory_type=MemoryType.PLAN, text=text,
                    created_at=now, updated_at=now, event_time=when)
    deps.repo.put_memory(store, memory)
    deps.index.upsert(store, [(memory, deps.embedder.embed([text])[0])])


def test_plans_are_the_tenants_open_ones_still_current(deps, store) -> None:
    now = deps.clock.now()
    _plan(deps, store, "Priya will run the Lisbon half marathon in October.", now + timedelta(days=120))
    _plan(deps, store, "Priya will visit the Lisbon flat viewing on Avenida da Igreja.", now - timedelta(days=30))

    plans = [e.text for e in card(deps, store, query="Lisbon plans: marathon and flat viewing").kept["plans"]]

    assert any("half marathon" in t for t in plans)
    assert not any("flat viewing" in t for t in plans)


def test_an_event_said_before_its_day_is_a_plan_of_the_card(deps, store) -> None:
    """A trial of plans over time (session 32): "a dentist appointment next Friday" is an event with a day ahead, not
    "will ..." — the card's plans section left it out (it showed among the memories only). An event already past
    when said stays a memory."""
    now = deps.clock.now()
    for mid, text, when, said in (("dentist", "Priya has a dentist appointment in Lisbon next Friday.",
                                   now + timedelta(days=4), now - timedelta(days=1)),
                                  ("tram", "Priya rode the Lisbon tram 28 last Friday.", now - timedelta(days=3), now)):
        memory = Memory(memory_id=mid, scope=Scope(**OLD), memory_type=MemoryType.EVENT, text=text, created_at=said,
                        updated_at=said, observed_at=said, event_time=when)
        deps.repo.put_memory(store, memory)
        deps.index.upsert(store, [(memory, deps.embedder.embed([text])[0])])
    kept = card(deps, store, query="Lisbon dentist appointment and the tram").kept
    assert any("dentist" in e.text for e in kept["plans"]) and not any("tram" in e.text for e in kept["plans"])
    assert any("tram" in e.text for e in kept["memories"])


def test_plans_are_shown_soonest_first(deps, store) -> None:
    now = deps.clock.now()
    for days in (20, 5, 12):
        _plan(deps, store, f"Priya will tour the Lisbon aquarium wing {days}.", now + timedelta(days=days))
    plans = card(deps, store, query="Lisbon aquarium tours").kept["plans"]
    shown = [e.text for e in sorted(plans, key=lambda e: e.position) if "aquarium" in e.text]
    assert [t.split("wing ")[1] for t in shown] == ["5.", "12.", "20."]


def test_a_thread_that_may_not_recall_gets_no_long_term_memories(deps, store) -> None:
    scopes.set_access_policy(deps, store, scope=NEW, policy=AccessPolicy.STORE_ONLY)
    result = card(deps, store)
    assert "memories" not in result.kept and "plans" not in result.kept and result.kept["recent"]


def test_sections_can_be_chosen(deps, store) -> None:
    result = card(deps, store, sections=["recent"])
    assert set(result.kept) == {"recent"} and "## Relevant memories" not in result.text


def test_unknown_thread_and_bad_bounds_are_refused(deps, store) -> None:
    with pytest.raises(NotFound) as missing:
        card(deps, store, thread_id="no-such-thread")
    assert missing.value.code == "thread_not_found"
    for bad in ({"budget_tokens": 0}, {"budget_tokens": 10**6}, {"recent_messages": -1}, {"sections": ["nope"]},
                {"sections": []}):  # an empty card asked for (an intra-tenant trial: answered 200, empty)
        with pytest.raises(InvalidInput):
            card(deps, store, **bad)


def test_the_cli_prints_a_threads_card(tmp_path, capsys) -> None:
    import json

    from memlane.cli import InProcessTransport, parser
    from memlane.sdk import Memlane

    transport = InProcessTransport(tmp_path / "cli")  # one in-process service: it owns the data dir
    client = Memlane("http://memlane.local", transport=transport)
    client.stores.create("demo")
    client.add("demo", {"app_id": APP, "tenant_id": TENANT, "run_id": "t1"}, text="Priya is allergic to peanuts.")

    def run(*argv: str) -> str:
        args = parser().parse_args(list(argv))
        assert args.handler(args, client) == 0
        return capsys.readouterr().out

    try:
        card = json.loads(run("--json", "context", "demo", "t1", "--app", APP, "--tenant", TENANT, "--budget", "120",
                              "--query", "food allergies"))
        assert card["tokens"]["total"] <= 120 and "peanuts" in card["text"]
        out = run("context", "demo", "t1", "--app", APP, "--tenant", TENANT, "--sections", "recent")
        assert out.startswith("## Recent messages") and "tokens" in out.splitlines()[-1]
    finally:
        transport.service.close()


def test_memories_are_valued_by_their_rank_in_search_not_their_raw_cosine() -> None:
    """Valued by cosine, value per token let short, loosely related memories push out the reranked head."""
    from memlane.policies.context_card import pack
    from memlane.services.search import SearchHit

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def hit(i: int, text: str, similarity: float) -> SearchHit:
        memory = Memory(memory_id=f"m{i}", scope=Scope(**OLD), text=text, created_at=now, updated_at=now)
        return SearchHit(memory=memory, score=1.0 - i / 100, similarity=similarity)

    head = hit(0, "Priya adopted a border collie called Biscuit from a shelter in Manchester in 2021.", 0.30)
    tail = [hit(i, f"Priya said hello number {i}.", 0.60) for i in range(1, 12)]
    section = context._memories(list(enumerate([head, *tail])), shown=[], covered=set())
    card = pack([section], 60, HFTokenizer())

    assert "m0" in [e.key for e in card.kept["memories"]]


def test_the_stated_profiles_open_the_card(deps, store) -> None:
    from memlane.services import profiles

    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Priya lives in Lisbon and prefers window seats.",
                 attributes={"home_airport": "LIS"})
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, agent_id="planner",
                 text="You are Priya's travel planner. Keep answers short.")

    result = card(deps, store)

    assert result.text.startswith("## Agent profile\n- ") and "travel planner" in result.text
    assert any("window seats" in e.text for e in result.kept["user_profile"])
    # one bullet a line: the profile's own "- name: value" lines are not bulleted again
    assert "\n- home_airport: LIS" in result.text and "- - " not in result.text
    assert result.text.index("## User profile") < result.text.index("## Relevant memories")


def _hit(i: int, text: str, memory_type: MemoryType = MemoryType.FACT) -> "context.search.SearchHit":
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    memory = Memory(memory_id=f"hit-{i:03d}", scope=Scope(**OLD), memory_type=memory_type, text=text,
                    created_at=now, updated_at=now, evidence=[f"turn-{i}"])
    return context.search.SearchHit(memory=memory, score=1.0 - i / 100, similarity=0.5)


def test_a_plan_deep_in_the_search_order_does_not_push_out_a_better_ranked_memory(deps, store, monkeypatch) -> None:
    """Plans were valued flat (0.5) whatever their rank: a barely relevant plan took the place of the
    memories search ranked higher (on LoCoMo the plans section held ~340 of a 1,500-token card)."""
    hits = [_hit(i, f"Priya noted item {i} in year {1980 + i}.") for i in range(40)]  # distinct: none restates another
    hits.append(_hit(40, "Priya will repaint her garden shed number 40.", MemoryType.PLAN))
    monkeypatch.setattr(context, "_recall", lambda *a, **k: hits)
    tok = HFTokenizer()
    head = "\n".join(["## Relevant memories", *(f"- {h.memory.text}" for h in hits[:15])])
    budget = tok.count(head) + 3  # room for the first fifteen memories, not for a plans section as well

    result = card(deps, store, sections=["memories", "plans"], budget_tokens=budget)

    kept = [e.key for e in result.kept["memories"]]
    assert kept == [h.memory.memory_id for h in hits[:15]]
    assert "plans" not in result.kept


class CountingTokenizer:
    """The shipped tokenizer, recording every text it is asked to count."""

    def __init__(self) -> None:
        self._inner = HFTokenizer()
        self.name = self._inner.name
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts):
        self.texts += list(texts)
        return self._inner.count_many(texts)


def test_the_next_card_of_a_thread_does_not_count_the_same_lines_again(deps, store, monkeypatch) -> None:
    """Counting every candidate line (and every shortened prefix) with the tokenizer at each build was a
    third of a card's time; a thread's next card re-packs mostly the same memories and turns."""
    counting = CountingTokenizer()
    monkeypatch.setattr(deps, "tokenizer", counting)
    first = card(deps, store)
    counting.texts.clear()

    again = card(deps, store)

    assert again.text == first.text and again.total == first.total
    assert not [t for t in counting.texts if t.startswith("- ") or t.startswith("## ")]


def test_a_long_turn_is_not_counted_again_by_the_threads_next_card(deps, store, monkeypatch) -> None:
    """Lines past 2,000 characters were counted at every build: a card of 50 turns of 32,000 characters took
    0.5-0.9 s each time. Every line's count is kept, by its digest."""
    counting = CountingTokenizer()
    monkeypatch.setattr(deps, "tokenizer", counting)
    long_turn = " ".join(f"Day {i}: we walked along the river and talked about the move to Porto." for i in range(200))
    ingest.add(deps, store, scope={**NEW, "run_id": "long"}, messages=[{"role": "user", "content": long_turn}])
    first = card(deps, store, thread_id="long")
    assert any(len(t) > 10_000 for t in counting.texts)
    counting.texts.clear()

    again = card(deps, store, thread_id="long")

    assert again.text == first.text and not [t for t in counting.texts if len(t) > 2_000]


def test_a_line_another_tenants_card_counted_is_counted_again(deps, store, monkeypatch) -> None:
    """A count remembered across tenants made a card whose lines another tenant's card had held build faster: the
    time of a card would tell a tenant what another's thread says. Each tenant's counts are its own."""
    counting = CountingTokenizer()
    monkeypatch.setattr(deps, "tokenizer", counting)
    said = "My PIN for the clinic portal is 4417."
    for tenant in ("priya", "mallory"):
        ingest.add(deps, store, scope={**NEW, "tenant_id": tenant, "run_id": "shared-words"},
                   messages=[{"role": "user", "content": said}])
    line = next(e.text for e in card(deps, store, thread_id="shared-words").kept["recent"] if said in e.text)
    assert f"- {line}" in counting.texts  # the line alone, as the packer counts it
    counting.texts.clear()

    theirs = context.build(deps, store, app_id=APP, tenant_id="mallory", thread_id="shared-words")

    assert line in [e.text for e in theirs.kept["recent"]] and f"- {line}" in counting.texts


def test_a_thread_deleted_and_made_again_under_its_ids_counts_its_lines_afresh(service, deps, store,
                                                                              monkeypatch) -> None:
    """A regression trial: the counts outlived the thread (and an erased tenant): whoever took its ids next could time
    a card to learn whether a guessed line was in the old thread's cards."""
    from memlane.services import threads

    counting = CountingTokenizer()
    monkeypatch.setattr(deps, "tokenizer", counting)
    said = "My PIN for the clinic portal is 4417."
    scope = {**NEW, "run_id": "again"}
    ingest.add(deps, store, scope=scope, messages=[{"role": "user", "content": said}])
    line = next(e.text for e in card(deps, store, thread_id="again").kept["recent"] if said in e.text)
    threads.delete(deps, store, app_id=APP, tenant_id=TENANT, thread_id="again", agent_id=NEW["agent_id"])
    service.drain()
    ingest.add(deps, store, scope=scope, messages=[{"role": "user", "content": said}])
    counting.texts.clear()

    card(deps, store, thread_id="again")

    assert f"- {line}" in counting.texts


def _similar(i: int, text: str, similarity: float, evidence: list[str] | None = None) -> "context.search.SearchHit":
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    memory = Memory(memory_id=f"sim-{i:03d}", scope=Scope(**OLD), text=text, created_at=now, updated_at=now,
                    evidence=evidence if evidence is not None else [f"turn-{i}"])
    return context.search.SearchHit(memory=memory, score=1.0 - i / 100, similarity=similarity)


def test_the_card_spends_no_budget_on_memories_that_are_not_relevant_to_the_turn(deps, store, monkeypatch) -> None:
    """Search always answers with its top k, relevant or not: without a floor a live thread's card filled its
    budget with loosely related memories (300-turn thread: 5.9x smaller than the flat history, not 10x).
    Past search's head, a hit far less similar to the turn than the best one is not offered."""
    head = context.RECIPES["default"].head
    relevant = [_similar(0, "Priya booked a table at Cervejaria Ramiro for Friday.", 0.82),
                _similar(1, "Priya loves seafood restaurants in Lisbon.", 0.74)]
    loose = [_similar(i, f"Priya mentioned item {i} of year {1980 + i}.", 0.15) for i in range(2, 40)]
    close = _similar(40, "Priya asked for a quiet table near the window.", 0.7)  # past the head, yet relevant
    monkeypatch.setattr(context, "_recall", lambda *a, **k: [*relevant, *loose, close])

    result = card(deps, store, sections=["memories"], budget_tokens=1500)

    assert [e.key for e in result.kept["memories"]] == [f"sim-{i:03d}" for i in range(head)] + ["sim-040"]
    assert not result.cut  # left out as irrelevant, not cut by the budget


def test_without_a_floor_the_same_card_fills_its_budget(deps, store, monkeypatch) -> None:
    """The recipe without the floor, as the bench compares it: every hit goes in while it fits."""
    hits = [_similar(0, "Priya booked a table at Cervejaria Ramiro for Friday.", 0.82),
            *(_similar(i, f"Priya mentioned item {i} of year {1980 + i}.", 0.15) for i in range(1, 40))]
    monkeypatch.setattr(context, "_recall", lambda *a, **k: hits)

    result = card(deps, store, sections=["memories"], budget_tokens=1500, recipe="no_floor")

    assert len(result.kept["memories"]) == 40


def test_an_unknown_card_recipe_is_refused(deps, store) -> None:
    with pytest.raises(InvalidInput) as err:
        card(deps, store, recipe="nope")
    assert err.value.field == "recipe"


def test_a_memory_restating_a_recent_turn_with_its_speaker_is_not_shown_again(service, deps, store,
                                                                             monkeypatch) -> None:
    """The rule extractor writes 'User: <turn>'; the card compared it with the turn's bare content, so the
    speaker's word kept a restatement of a short shown turn under the 80 % share (a 300-turn thread's card
    repeated its small talk)."""
    turn = "Pouring rain all Monday."
    ingest.add(deps, store, scope=NEW, messages=[{"role": "user", "content": turn}])
    service.drain()
    hits = [_similar(0, f"User: {turn}", 0.9, evidence=["elsewhere"]),
            _similar(1, "Priya booked a table at Cervejaria Ramiro for Friday.", 0.8)]
    monkeypatch.setattr(context, "_recall", lambda *a, **k: hits)

    result = card(deps, store, sections=["memories", "recent"])

    assert [e.key for e in result.kept["memories"]] == ["sim-001"]


def test_near_identical_memories_past_a_few_take_no_budget(deps, store, monkeypatch) -> None:
    """Near-identical memories (small talk said every evening) filled a live thread's card: past the best
    ranked few, the others add nothing but tokens."""
    alike = context.RECIPES["default"].alike
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    hits = [_similar(i, f"Priya had a long {day} today, pouring with rain from start to finish.", 0.8 - i / 100)
            for i, day in enumerate(days)]
    hits.append(_similar(9, "Priya booked a table at Cervejaria Ramiro for Friday.", 0.7))
    monkeypatch.setattr(context, "_recall", lambda *a, **k: hits)

    result = card(deps, store, sections=["memories"])

    assert 1 <= alike < len(days)
    assert [e.key for e in result.kept["memories"]] == [f"sim-{i:03d}" for i in range(alike)] + ["sim-009"]


def test_the_dates_grouped_recipe_names_a_day_once_above_its_memories(deps, store) -> None:
    dated = card(deps, store, query="peanut allergy vegetarian pottery", sections=["memories"],
                 recipe="dated_lines")
    grouped = card(deps, store, query="peanut allergy vegetarian pottery", sections=["memories"],
                   recipe="dates_grouped")
    day = f"{deps.clock.now():%Y-%m-%d}"  # the first thread's memories were all said today
    assert dated.text.count(day) == len(dated.kept["memories"]) >= 2
    assert grouped.text.count(day) == 1 and f"\n{day}:\n- " in grouped.text
    assert {e.key for e in grouped.kept["memories"]} == {e.key for e in dated.kept["memories"]}
    assert grouped.total < dated.total and grouped.total == HFTokenizer().count(grouped.text)


def test_the_route_says_under_which_date_the_card_lists_each_memory(deps, store) -> None:
    from memlane.api.context_models import ContextOut

    out = ContextOut.of(card(deps, store, query="peanut allergy vegetarian pottery")).model_dump()
    day = f"{deps.clock.now():%Y-%m-%d}"
    assert out["sections"]["memories"] and all(e["group"] == day for e in out["sections"]["memories"])
    assert out["sections"]["recent"] and all(e["group"] == day for e in out["sections"]["recent"])


def test_the_recent_turns_name_their_day_once_not_on_every_line(deps, store) -> None:
    result = card(deps, store, sections=["recent"])
    day = f"{deps.clock.now():%Y-%m-%d}"
    assert len(result.kept["recent"]) == len(SECOND_THREAD)
    assert result.text.count(day) == 1 and f"\n{day}:\n- user: {SECOND_THREAD[0][1]}" in result.text
    assert result.text.rstrip().endswith(f"- user: {SECOND_THREAD[-1][1]}")


def test_an_open_item_cites_its_messages_and_is_not_shown_twice(deps, store, monkeypatch) -> None:
    """The summary's open items were entries with no evidence (the card's evidence promises every entry's
    messages), and one its sentences said already was in the card twice."""
    first = deps.repo.list_messages(store, Scope(**OLD), limit=10, cursor=None)[0]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    also_said = "2026-01-01 Priya: I will fly to Goa on March 21."
    summary = ThreadSummary(scope=Scope(**OLD), created_at=now, updated_at=now,
                            sentences=[SummarySentence(text=also_said, evidence=[first[1].message_id])],
                            open_items=["2026-01-01 Priya: I want to find a pottery class for Anjali.", also_said],
                            cited={"2026-01-01 Priya: I want to find a pottery class for Anjali.": [first[2].message_id],
                                   also_said: [first[1].message_id]})
    monkeypatch.setattr(context, "get_summary", lambda deps, store, scope: summary if scope.run_id == "thread-1" else None)

    result = card(deps, store, thread_id="thread-1", query="pottery class and Goa", recent_messages=0)

    plans = [e for e in result.kept["plans"] if e.key.startswith("open#")]
    assert [(e.text, e.evidence) for e in plans] == [(summary.open_items[0], (first[2].message_id,))]
    assert [e.text for e in result.kept["summary"]] == [also_said]
    assert first[2].message_id in result.evidence


def test_a_plan_drawn_from_the_messages_an_open_item_cites_is_shown_once(deps, store, monkeypatch) -> None:
    """The summary's open item and the plan memory extracted from the same turn were both in the card."""
    first = deps.repo.list_messages(store, Scope(**OLD), limit=10, cursor=None)[0]
    now = deps.clock.now()
    item = "2026-01-01 Priya: I want to find a pottery class for Anjali."
    summary = ThreadSummary(scope=Scope(**OLD), created_at=now, updated_at=now, open_items=[item],
                            cited={item: [first[2].message_id]})
    monkeypatch.setattr(context, "get_summary", lambda deps, store, scope: summary if scope.run_id == "thread-1" else None)
    for n, (text, evidence) in enumerate((("Priya plans to find a pottery class for Anjali's birthday.",
                                           [first[2].message_id]),
                                          ("Priya plans a pottery weekend in Porto with Anjali.", [first[0].message_id]),
                                          # the same turn's other plan (regression trial: it was dropped too)
                                          ("Priya flies to Lisbon with Anjali on June 3 for the pottery fair.",
                                           [first[2].message_id]))):
        memory = Memory(memory_id=f"pottery-plan-{n}", scope=Scope(**OLD),
                        memory_type=MemoryType.PLAN, text=text, evidence=evidence, created_at=now, updated_at=now)
        deps.repo.put_memory(store, memory)
        deps.index.upsert(store, [(memory, deps.embedder.embed([text])[0])])

    plans = [e.text for e in card(deps, store, thread_id="thread-1", query="pottery class for Anjali",
                                  recent_messages=0).kept["plans"]]

    assert plans[0] == item and not any("birthday" in t for t in plans)
    assert any("pottery weekend in Porto" in t for t in plans)  # another turn's plan stays
    assert any("June 3" in t for t in plans)  # and another plan of the same turn


def test_what_the_agents_profile_says_of_the_user_is_shown_once_in_the_user_profile(deps, store, monkeypatch) -> None:
    """A dream distils an agent's profile from the agent's memories, which are about the user: every user fact
    was in the card twice, under the agent's profile and under the user's."""
    user = "- is allergic to: peanuts\n- lives in: Lisbon"
    monkeypatch.setattr(context, "tenant_profile", lambda *a, **kw: user)
    monkeypatch.setattr(context, "agent_profile", lambda *a, **kw: "You plan Priya's trips.\n" + user + "\n- speaks: Hindi")
    both = card(deps, store, recent_messages=0)
    assert [e.text for e in both.kept["agent_profile"]] == ["You plan Priya's trips.", "speaks: Hindi"]
    assert [e.text for e in both.kept["user_profile"]] == ["is allergic to: peanuts", "lives in: Lisbon"]
    alone = card(deps, store, sections=["agent_profile"])  # no user section: nothing is left out of the agent's
    assert [e.text for e in alone.kept["agent_profile"]] == ["You plan Priya's trips.", "is allergic to: peanuts",
                                                             "lives in: Lisbon", "speaks: Hindi"]


def test_a_plan_line_is_as_short_as_a_memory_line(deps, store, monkeypatch) -> None:
    """Plans kept the speaker's prefix their statement repeats and the quote of the turn they answered, which
    the memories' lines had dropped (docs/benchmarks.md §7): ~10-30 tokens a plan."""
    plan = _hit(0, "Priya: Priya will paint the shed in May. (replying to Anjali: Any plans for the garden?)",
                MemoryType.PLAN)
    monkeypatch.setattr(context, "_recall", lambda *a, **k: [plan])

    shown = card(deps, store, sections=["plans"]).kept["plans"]
    before = card(deps, store, sections=["plans"], recipe="grouped_compact_noreply").kept["plans"]

    assert [e.text for e in shown] == ["Priya will paint the shed in May."]
    assert [e.text for e in before] == [plan.memory.text]


def test_a_card_shows_the_quote_of_a_turn_its_memory_cites_and_claims_no_turn_it_does_not_show(deps, store,
                                                                                                 monkeypatch) -> None:
    """The rule extractor quotes a short turn whole in its reply's memory, cites it, and gives it no memory of its
    own; the card dropped every quote, so its evidence named turns it did not show ("Audrey took a dog grooming
    course" was counted as held on LoCoMo behind "Andrew would love to hear some tips")."""
    cited = _hit(0, "Andrew would love to hear some tips. (replying to Audrey: Audrey took a dog grooming course.)")
    cited.memory.evidence[:] = ["audrey-turn", "andrew-turn"]
    asked = _hit(1, "Priya: Priya will paint the shed in May. (replying to Anjali: Any plans for the garden?)")
    monkeypatch.setattr(context, "_recall", lambda *a, **k: [cited, asked])

    shown = card(deps, store, sections=["memories"])
    lines = {e.text: e.evidence for e in shown.kept["memories"]}
    assert lines == {"Andrew would love to hear some tips. (replying to Audrey: Audrey took a dog grooming course.)":
                     ("audrey-turn", "andrew-turn"),
                     "Priya will paint the shed in May.": ("turn-1",)}  # the question alone is not cited: dropped
    before = card(deps, store, sections=["memories"], recipe="compact_plans")
    assert {e.text: e.evidence for e in before.kept["memories"]}["Andrew would love to hear some tips."] == \
        ("andrew-turn",)  # the quote left out: its turn is not claimed
    assert "audrey-turn" not in before.evidence


def test_a_fact_the_user_profile_states_is_not_contradicted_by_the_agents_copy(deps, store, monkeypatch) -> None:
    """A trial's finding: the user stated `lives_in: Lisbon` over the distilled "lives in: Porto", and the card
    showed "## Agent profile - lives in: Porto" above "## User profile - lives_in: Lisbon". A fact the user's
    section names is the user's section's to show, whatever its value in the agent's copy."""
    monkeypatch.setattr(context, "tenant_profile", lambda *a, **kw: "- lives_in: Lisbon\n- is allergic to: peanuts")
    monkeypatch.setattr(context, "agent_profile",
                        lambda *a, **kw: "You plan Priya's trips. Note: be brief.\n- lives in: Porto\n- speaks: Hindi")
    shown = card(deps, store, recent_messages=0)
    assert [e.text for e in shown.kept["agent_profile"]] == ["You plan Priya's trips. Note: be brief.", "speaks: Hindi"]
    assert "Porto" not in shown.text and "lives_in: Lisbon" in shown.text


def test_a_plan_said_in_a_turn_the_card_shows_is_not_shown_again_as_a_plan(service, deps, store) -> None:
    """A trial: "I will visit my mother in Seville next Friday." was the card's last turn and, word for word, its
    only open plan — half of a small card said twice."""
    ingest.add(deps, store, scope=NEW, messages=[{"role": "user", "content": "I will visit my mother in Seville "
                                                                           "next Friday."}])
    service.drain()
    result = card(deps, store)
    assert any("Seville" in e.text for e in result.kept["recent"])
    assert not any("Seville" in e.text for e in result.kept.get("plans", ()))
    older = card(deps, store, recent_messages=1, query="my mother in Seville", thread_id="thread-1")
    assert any("Seville" in e.text for e in older.kept["plans"])  # not shown as a turn there: the plan is


def test_a_card_cites_no_turn_of_another_thread_switched_to_store_nothing(service, deps, store) -> None:
    """A trial: once the first thread was switched to recall_only, search kept its turns to itself, yet the second
    thread's card still listed their ids as its memories' evidence."""
    scopes.set_access_policy(deps, store, scope=OLD, policy=AccessPolicy.RECALL_ONLY)
    result = card(deps, store, query="peanut allergy vegetarian")
    first = {m.message_id for m in deps.repo.list_messages(store, Scope(**OLD), limit=10, cursor=None)[0]}
    assert any("peanut" in e.text for e in result.kept["memories"])  # made before the switch: still recalled
    assert not first & set(result.evidence)
    assert not any(first & set(e.evidence) for es in result.kept.values() for e in es)
    own = card(deps, store, query="peanut allergy vegetarian", thread_id="thread-1")
    assert first & set(own.evidence)  # its own card still cites them


def test_an_open_item_of_a_turn_the_card_shows_is_not_shown_again(deps, store, monkeypatch) -> None:
    """A regression trial: the plans half of that fix took out search's plans drawn from shown turns, and left the
    summary's open items citing a turn shown as recent beside it."""
    first = deps.repo.list_messages(store, Scope(**OLD), limit=10, cursor=None)[0]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    item = "2026-01-01 Priya: I want to find a pottery class for Anjali."
    summary = ThreadSummary(scope=Scope(**OLD), created_at=now, updated_at=now, open_items=[item],
                            cited={item: [first[2].message_id]})
    monkeypatch.setattr(context, "get_summary",
                        lambda deps, store, scope: summary if scope.run_id == "thread-1" else None)

    shown = card(deps, store, thread_id="thread-1", query="pottery class", recent_messages=3)
    assert first[2].message_id in {e.key for e in shown.kept["recent"]}
    assert not [e for e in shown.kept.get("plans", ()) if e.key.startswith("open#")]
    hidden = card(deps, store, thread_id="thread-1", query="pottery class", recent_messages=0)
    assert [e.text for e in hidden.kept["plans"] if e.key.startswith("open#")] == [item]


def test_a_card_cites_no_turn_of_another_agents_thread_of_the_same_id_switched_to_store_nothing(
        service, deps, store) -> None:
    """A regression trial: the check took a thread of the card's own id for the card's own, whatever its agent."""
    twin = {**NEW, "agent_id": "booker"}
    ingest.add(deps, store, scope=twin, messages=[{"role": "user", "content": "I collect vintage fountain pens."}])
    service.drain()
    scopes.set_access_policy(deps, store, scope=twin, policy=AccessPolicy.NONE)
    result = card(deps, store, query="fountain pens")
    theirs = {m.message_id for m in deps.repo.list_messages(store, Scope(**twin), limit=10, cursor=None)[0]}
    assert any("fountain pens" in e.text for e in result.kept["memories"])
    assert not theirs & set(result.evidence)


def test_a_card_recalling_from_its_agent_holds_no_other_agents_memories_or_distilled_profile(
        service, deps, store, monkeypatch) -> None:
    """A trial (session 31): an MCP server bound to one agent showed another agent's memories in its card — of
    that agent's other threads, and of its thread of the same id — since a card recalls from the whole tenant."""
    twin = {**NEW, "agent_id": "booker"}
    for scope in (twin, {**twin, "run_id": "thread-9"}):
        ingest.add(deps, store, scope=scope, messages=[{"role": "user", "content": "I collect vintage fountain pens."}])
    service.drain()
    asked: list[bool] = []
    monkeypatch.setattr(context, "tenant_profile", lambda *a, distilled=True, **kw: asked.append(distilled) or "")
    theirs = {m.message_id for s in (twin, {**twin, "run_id": "thread-9"})
              for m in deps.repo.list_messages(store, Scope(**s), limit=10, cursor=None)[0]}

    tenant = card(deps, store, query="fountain pens and peanut allergy")
    assert any("fountain pens" in e.text for e in tenant.kept["memories"]) and theirs & set(tenant.evidence)
    agent = card(deps, store, query="fountain pens and peanut allergy", recall_scope="agent")
    assert "fountain pens" not in agent.text and not theirs & set(agent.evidence)
    assert any("peanut allergy" in e.text for e in agent.kept["memories"])  # the agent's other thread's
    assert asked == [True, False]  # a dream distils the user's profile from every agent's memories
    with pytest.raises(InvalidInput) as err:
        card(deps, store, recall_scope="everyone")
    assert err.value.field == "recall_scope"
