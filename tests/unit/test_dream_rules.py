"""What the dream adds to the decision module: duplicate guards, merge confidences, recency, expired
plans, skills, profiles."""

from datetime import datetime, timedelta, timezone

from memlane.domain.models import DreamActionKind, DreamScope, Memory, MemoryType, Message
from memlane.domain.scope import Scope
from memlane.dream.engine import Proposal, action_id
from memlane.services.dream_actions import digest
from memlane.services.dream_schedule import due
from memlane.domain.models import ActivityInfo
from memlane.policies import consolidation, dream_profile, dream_rules, dream_skills

T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
SCOPE = Scope(app_id="app", tenant_id="u1", agent_id="bot", run_id="r1")


def memory(mid, text, *, at=T0, memory_type=MemoryType.FACT, evidence=None, event_time=None):
    return Memory(memory_id=mid, scope=SCOPE, text=text, memory_type=memory_type, created_at=at, updated_at=at,
                  evidence=evidence or [], event_time=event_time)


def test_numbers_and_names_block_a_merge_that_embeddings_would_make():
    assert not consolidation.duplicates("Ann is 34 years old.", "Ann is 35 years old.")
    assert not consolidation.duplicates("Ann lives in Boston.", "Ann lives in Denver.")
    assert consolidation.duplicates("Ann is allergic to peanuts.", "Ann has a peanut allergy.")
    # a capitalised word that only opens a sentence is not a name
    assert consolidation.duplicates("Ann: Blue is Ann's favourite colour.", "Ann's favourite colour is blue.")
    # one relation with two values, or a denial, is never the same fact
    assert not consolidation.duplicates("Ann likes jazz.", "Ann likes hiking.")
    assert not consolidation.duplicates("Ann is allergic to penicillin.", "Ann is not allergic to penicillin.")


def test_merge_confidence_rises_with_similarity_and_drops_with_extra_words():
    low = dream_rules.merge_confidence(0.92, 0.92, same_fact=False, residual_words=0)
    high = dream_rules.merge_confidence(0.99, 0.92, same_fact=False, residual_words=0)
    assert low == 0.8 and 0.95 < high < 1.0
    assert dream_rules.merge_confidence(0.93, 0.92, same_fact=True, residual_words=0) == 0.9
    assert dream_rules.merge_confidence(0.99, 0.92, same_fact=False, residual_words=5) == 0.7


def test_recency_is_when_it_was_said():
    early = memory("a", "x", at=T0 + timedelta(days=5), evidence=["01aaaaaaaa00zzzz"])
    late = memory("b", "y", at=T0, evidence=["01bbbbbbbb00aaaa"])  # extracted first, said later
    assert dream_rules.recency(late) > dream_rules.recency(early)
    # the message's time, where the memory records it, over the order it was written in
    said_late = memory("c", "z", at=T0).model_copy(update={"observed_at": T0 + timedelta(days=9)})
    written_late = memory("d", "w", at=T0 + timedelta(days=30)).model_copy(update={"observed_at": T0})
    assert dream_rules.recency(said_late) > dream_rules.recency(written_late)


def test_expired_plan_needs_its_time_passed_plus_grace():
    plan = memory("p", "Ann will fly to Rome.", memory_type=MemoryType.PLAN, event_time=T0)
    assert dream_rules.expired_plan(plan, T0 + timedelta(days=2), grace_days=1)
    assert not dream_rules.expired_plan(plan, T0 + timedelta(hours=12), grace_days=1)
    assert not dream_rules.expired_plan(memory("f", "x", event_time=T0), T0 + timedelta(days=30), grace_days=1)


def test_profile_keeps_newest_value_and_earlier_ones():
    """No attribute table: each statement is a relation and a value, and whether a newer one changes an
    entry is the decision module's call (a move, another value of the same relation, a retraction)."""
    mems = [memory("1", "Ann lives in Boston.", at=T0),
            memory("2", "Ann moved from Boston to Denver.", at=T0 + timedelta(1)),
            memory("3", "Ann loves hiking.", at=T0), memory("4", "Ann's sister lives in Paris.", at=T0),
            memory("5", "Ann has a dog named Max.", at=T0), memory("6", "Ann enjoys hiking.", at=T0 + timedelta(2)),
            memory("7", "Ann prefers aisle seats.", at=T0, memory_type=MemoryType.PREFERENCE),
            memory("8", "Ann's apartment is in Brooklyn.", at=T0),
            memory("9", "Ann's apartment is in Queens.", at=T0 + timedelta(3)),
            memory("10", "Ann is vegetarian.", at=T0),
            memory("11", "Ann is not vegetarian anymore.", at=T0 + timedelta(4)),
            memory("12", "Ann can't stand coffee.", at=T0)]
    p = dream_profile.build(store="s", app_id="app", tenant_id="u1", agent_id=None, memories=mems)
    assert p.subject == "Ann"
    residence = next(e for e in p.attributes if e.name == "lives in")
    assert residence.value == "Denver" and residence.previous == ["Boston"] and residence.evidence == ["2"]
    assert not any(e.value == "Paris" for e in p.attributes)  # the sister's, not Ann's
    apartment = next(e for e in p.attributes if e.name == "apartment")
    assert apartment.value == "Queens" and apartment.previous == ["Brooklyn"]
    assert not any("vegetarian" in e.value for e in p.attributes)  # retracted
    hiking = next(e for e in p.preferences if e.value == "hiking")
    assert hiking.name == "likes" and sorted(hiking.evidence) == ["3", "6"] and hiking.confidence > 0.65
    assert ("dislikes", "coffee") in {(e.name, e.value) for e in p.preferences}
    assert ("likes", "aisle seats") in {(e.name, e.value) for e in p.preferences}
    assert any(e.name == "has" and e.value == "dog named Max" for e in p.attributes)
    assert "lives in: Denver" in p.summary and "likes" in p.summary


def test_interactions_need_steps_and_a_confirmation():
    def msg(i, role, text):
        return Message(message_id=f"m{i}", scope=SCOPE, role=role, content=text, created_at=T0 + timedelta(minutes=i),
                       request_id="r")
    convo = [msg(0, "user", "How do I reset my router?"),
             msg(1, "assistant", "1. Unplug the router.\n2. Wait 30 seconds.\n3. Plug it back in."),
             msg(2, "user", "That worked, thanks!"),
             msg(3, "user", "How do I clear the cache?"),
             msg(4, "assistant", "First, open settings, then choose privacy, then press clear."),
             msg(5, "user", "It didn't work, same error.")]
    found = dream_skills.interactions(convo)
    assert [i.request for i in found] == ["reset my router"]
    assert found[0].steps == ("Unplug the router.", "Wait 30 seconds.", "Plug it back in.")
    assert found[0].message_ids == ("m0", "m1", "m2")
    assert dream_skills.skill_text("reset my router", found[0].steps).startswith("How to reset my router: 1. Unplug")
    assert dream_rules.skill_confidence(2) == 0.6 and dream_rules.skill_confidence(9) == 0.9


def test_action_ids_are_derived_from_what_the_action_does():
    scope = DreamScope(app_id="app", tenant_id="u1")
    a = Proposal(DreamActionKind.MERGE, 0.9, "x", SCOPE, target_ids=("b", "c"), keep_id="a")
    b = Proposal(DreamActionKind.MERGE, 0.5, "other words", SCOPE, target_ids=("c", "b"), keep_id="a")
    c = Proposal(DreamActionKind.MERGE, 0.9, "x", SCOPE, target_ids=("b",), keep_id="a")
    assert action_id("s", scope, a) == action_id("s", scope, b) != action_id("s", scope, c)
    assert action_id("s", scope, a) != action_id("s", DreamScope(app_id="app", tenant_id="u2"), a)


def test_digest_is_the_same_whichever_backend_returned_the_numbers():
    assert digest({"importance": 1.0, "x": [2.0]}) == digest({"importance": 1, "x": [2]})
    assert digest({"a": 1}) != digest({"a": 2})


def test_due_means_pending_and_not_freshly_queued():
    info = ActivityInfo(scope=SCOPE, last_activity=T0, pending_since=T0)
    assert due(info, T0, 900)
    assert not due(info.model_copy(update={"pending_since": None}), T0, 900)
    queued = info.model_copy(update={"queued_task": "t", "queued_at": T0})
    assert not due(queued, T0 + timedelta(minutes=5), 900) and due(queued, T0 + timedelta(minutes=20), 900)


def test_a_memory_that_is_only_its_subject_reads_as_no_claim():
    """Found by the API fuzz: a memory whose text is the subject alone ("Alice.") made the profile
    rebuild of every deletion fail with an IndexError (a 500 on DELETE memory and DELETE thread)."""
    mems = [memory("m1", "Alice."), memory("m2", "User"), memory("m3", "Alice lives in Lisbon.")]
    p = dream_profile.build(store="s", app_id="app", tenant_id="u1", agent_id=None, memories=mems)
    assert [(a.name, a.value) for a in p.attributes] == [("lives in", "Lisbon")]
