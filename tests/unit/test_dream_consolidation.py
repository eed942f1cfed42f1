"""The rules dream decides changed facts with the write-time decision module (policies/consolidation.py):
what write time could not see — memories written with consolidation off, or imported before it
existed — gets UPDATE / DELETE proposals with its calibrated confidences."""

from datetime import datetime, timedelta, timezone

from memlane.domain.models import DreamActionKind, DreamScope, Memory, MemoryType
from memlane.domain.scope import Scope
from memlane.dream.engine import DreamInput
from memlane.dream.rules import RulesEngine
from memlane.policies import consolidation
from memlane.policies.consolidation import Neighbour, decide

T0 = datetime(2025, 1, 10, 9, tzinfo=timezone.utc)
THRESHOLD = 0.8  # the store's default dream_threshold
CHANGES = frozenset({DreamActionKind.UPDATE, DreamActionKind.DELETE, DreamActionKind.MERGE})


def mem(mid, text, day, tenant="u1", run="r1", agent="bot", memory_type=MemoryType.FACT):
    at = T0 + timedelta(days=day)
    scope = Scope(app_id="app", tenant_id=tenant, agent_id=agent, run_id=run)
    return Memory(memory_id=mid, scope=scope, text=text, memory_type=memory_type, created_at=at, updated_at=at,
                  observed_at=at, valid_from=at)


def propose(minilm, *memories, tenant="u1"):
    data = DreamInput(store="s", scope=DreamScope(app_id="app", tenant_id=tenant), now=T0 + timedelta(days=400),
                      memories=list(memories), kinds=CHANGES)
    return RulesEngine(minilm).propose(data)


def test_a_changed_value_is_an_update_proposal_above_the_threshold(minilm):
    old = mem("a", "Ann lives in Boston.", 0, run="r1")
    new = mem("b", "Ann moved from Boston to Denver last month.", 60, run="r2")
    (p,) = propose(minilm, old, new)
    assert p.kind == DreamActionKind.UPDATE and p.target_ids == ("a",) and p.keep_id == "b"
    # the confidence is the decision module's, for this kind of evidence
    decision = decide(new.text, [Neighbour(old, 0.8)], duplicate_similarity=0.95, observed_at=new.observed_at)
    assert p.confidence == decision.confidence >= THRESHOLD
    assert "Boston" in p.rationale and "Denver" in p.rationale


def test_the_same_relation_with_another_value_is_an_update(minilm):
    old = mem("a", "Ann's apartment is in Brooklyn.", 0)
    new = mem("b", "Ann's apartment is in Queens.", 30, run="r2")
    (p,) = propose(minilm, new, old)  # in any order: the newer statement is the one that holds
    assert (p.kind, p.target_ids, p.keep_id) == (DreamActionKind.UPDATE, ("a",), "b")
    assert p.confidence >= THRESHOLD


def test_a_retraction_closes_the_old_memory_and_is_kept(minilm):
    old = mem("a", "Ann is allergic to penicillin.", 0)
    new = mem("b", "Ann is not allergic to penicillin after all.", 30, run="r2")
    (p,) = propose(minilm, old, new)
    assert (p.kind, p.target_ids, p.keep_id) == (DreamActionKind.DELETE, ("a",), "b")
    assert p.confidence >= THRESHOLD


def test_two_pets_or_two_hobbies_are_both_kept(minilm):
    assert propose(minilm, mem("a", "Ann has a dog named Rex.", 0),
                   mem("b", "Ann also adopted a cat named Miso.", 30, run="r2")) == []
    assert propose(minilm, mem("a", "Ann likes jazz.", 0), mem("b", "Ann likes hiking.", 30, run="r2")) == []


def test_a_twin_tenants_memories_are_never_touched(minilm):
    twin_old = mem("t1", "Ann lives in Boston.", 0, tenant="twin")
    twin_new = mem("t2", "Ann moved from Boston to Denver.", 60, tenant="twin")
    mine = mem("a", "Ann lives in Boston.", 0)
    # the twin's memories in the input (as a buggy gather would pass them) are never targets
    assert propose(minilm, twin_old, twin_new, mine) == []


def test_an_older_statement_imported_later_is_the_one_superseded(minilm):
    new = mem("b", "Ann works as a paramedic now.", 90, run="r2")
    old = mem("a", "Ann works as a nurse.", 0)  # written after `new`, said before it
    old = old.model_copy(update={"created_at": T0 + timedelta(days=200)})
    (p,) = propose(minilm, new, old)
    assert (p.target_ids, p.keep_id) == (("a",), "b")


def test_a_chain_of_changes_comes_in_the_order_it_applies(minilm):
    """Boston → Denver → Austin: each statement is superseded by the next, and the actions come in the
    order they apply (the first keeps the memory the second then closes)."""
    a, b, c = (mem("a", "Ann lives in Boston.", 0), mem("b", "Ann moved from Boston to Denver.", 30, run="r2"),
               mem("c", "Ann moved from Denver to Austin.", 90, run="r3"))
    found = propose(minilm, c, a, b)
    assert [(p.target_ids, p.keep_id) for p in found] == [(("a",), "b"), (("b",), "c")]


def test_possessive_subjects_are_other_people():
    """"Ann lives in Paris" says something "Ann's sister lives in Paris" does not: never a NOOP."""
    sister = Neighbour(mem("s", "Ann's sister lives in Paris.", 0), 0.91)
    assert decide("Ann lives in Paris.", [sister], duplicate_similarity=0.95).action == "ADD"
    assert not consolidation.duplicates("Ann lives in Paris.", "Ann's sister lives in Paris.")


def test_a_change_told_to_another_agent_supersedes_as_at_write_time(minilm):
    old = mem("a", "Ann is based in Lisbon.", 0, agent="bot")
    new = mem("b", "Ann is based in Madrid now.", 60, agent="travel", run="r2")
    (p,) = propose(minilm, old, new)
    assert (p.kind, p.target_ids, p.keep_id) == (DreamActionKind.UPDATE, ("a",), "b")
    # a dream narrowed to the other agent closes nothing outside its scope
    data = DreamInput(store="s", scope=DreamScope(app_id="app", tenant_id="u1", agent_id="travel"),
                      now=T0 + timedelta(days=400), memories=[old, new], kinds=CHANGES)
    assert RulesEngine(minilm).propose(data) == []


def test_remarks_that_merely_sound_alike_wait_for_review(minilm):
    """False changes the dream proposed on real conversations (LoCoMo): a change cue ("now", "updated",
    "turned out") in a remark that shares no word with the memory, only closeness in meaning. They are
    their own kind of evidence, below the default threshold: safe_auto leaves them pending."""
    pairs = [("Audrey: Let Audrey knows how it goes.", "Audrey: Now Audrey is gonna order some sushi for tonight."),
             ("Tim: Glad Tim could help.", "Tim: It was such a fun project and Tim is really happy with how it turned out."),
             ("Andrew: Hope Andrew finds one soon.", "Andrew: Keep Andrew updated on their progress.")]
    for old, new in pairs:
        found = propose(minilm, mem("a", old, 0), mem("b", new, 30, run="r2"))
        assert all(p.confidence < THRESHOLD for p in found), found
