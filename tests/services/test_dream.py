"""Dream with the rules engine (no LLM): merges, supersessions, modes, undo, profiles, skills."""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.errors import Conflict, InvalidInput, NotFound
from memlane.domain.models import DreamActionKind, DreamActionStatus, DreamMode, MemoryStatus, TaskStatus
from memlane.policies.consolidation import CONFIDENCE, Evidence
from memlane.repository import tenant_pk
from memlane.services import dream, ingest, memories, search, stores

APP, TENANT = "app", "u1"
SCOPE = {"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": "r1"}
TENANT_SCOPE = {"app_id": APP, "tenant_id": TENANT}
T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)

@pytest.fixture(autouse=True)
def _memories_as_written_without_write_time_consolidation(deps):
    """The dream's own rules, on memories that write time left as they were (consolidate_on_write off,
    as memories written before it existed): with it on, these contradictions are settled on write
    (tests/services/test_knowledge_updates.py)."""
    deps.settings = replace(deps.settings, consolidate_on_write=False)


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def say(deps, store, *texts, run="r1", day=0, agent="bot", name="Ann"):
    """Ann says `texts` in one message each, on day `day` after T0, extracted at once."""
    at = T0 + timedelta(days=day)
    ingest.add(deps, store, scope={**SCOPE, "agent_id": agent, "run_id": run}, sync=True,
               messages=[{"role": "user", "name": name, "content": t, "created_at": at + timedelta(seconds=i)}
                         for i, t in enumerate(texts)])


def by_text(deps, store):
    return {m.text: m for m in deps.repo.iter_memories(store, APP, TENANT)}


def items(deps, store, prefix):
    return deps.table.query(tenant_pk(store, APP, TENANT), prefix=prefix, limit=1000).items


def hits(deps, store, query, **kw):
    return [(h.memory.memory_id, h.memory.status, h.score, h.similarity)
            for h in search.search(deps, store, query=query, scope=TENANT_SCOPE, top_k=20, **kw)]


def actions(deps, store, task, kind=None):
    found, _ = dream.list_actions(deps, store, task.task_id)
    return [a for a in found if kind is None or a.kind == kind]


def run_dream(deps, store, **kw):
    return dream.start(deps, store, scope=kw.pop("scope", TENANT_SCOPE), sync=True, **kw)


def test_two_phrasings_of_one_fact_end_as_one_memory(deps, store):
    say(deps, store, "I'm allergic to peanuts.", run="r1", day=0)
    say(deps, store, "I have a peanut allergy.", run="r2", day=1)
    task = run_dream(deps, store, kinds=[DreamActionKind.MERGE])
    assert task.status == TaskStatus.SUCCEEDED and task.engine == "rules"
    (merge,) = actions(deps, store, task)
    assert merge.kind == DreamActionKind.MERGE and merge.status == DreamActionStatus.PENDING
    assert merge.confidence >= 0.8 and "same fact" in merge.rationale
    assert {m.text for m in merge.before} == {"Ann is allergic to peanuts.", "Ann has a peanut allergy."}

    dream.apply_action(deps, store, merge.action_id)
    mems = by_text(deps, store)
    keep, gone = mems[merge.after.text], next(m for m in mems.values() if m.memory_id in merge.target_ids)
    assert keep.status == MemoryStatus.ACTIVE and gone.status == MemoryStatus.SUPERSEDED
    assert gone.superseded_by == keep.memory_id and keep.supersedes == gone.memory_id
    assert [h[0] for h in hits(deps, store, "peanut allergy")] == [keep.memory_id]
    with_old = {h[0]: h[1] for h in hits(deps, store, "peanut allergy", include_superseded=True)}
    assert with_old == {keep.memory_id: MemoryStatus.ACTIVE, gone.memory_id: MemoryStatus.SUPERSEDED}


def test_copies_of_a_fact_fold_into_one_merge_with_its_paraphrase(deps, store):
    """Two identical memories and a paraphrase: the merge kept the paraphrase and folded one copy only, because
    the other copy's pair with the survivor had not been judged one fact; a copy of a folded memory is folded too."""
    from memlane.services import explicit

    explicit.write(deps, store, scope=TENANT_SCOPE, memories=[
        {"text": "Bob drinks coffee every morning.", "memory_id": "cof1"},
        {"text": "Bob drinks coffee every morning.", "memory_id": "cof2"},
        {"text": "Bob drinks coffee each morning.", "memory_id": "cof3"}])
    task = run_dream(deps, store, kinds=[DreamActionKind.MERGE])
    (merge,) = actions(deps, store, task)
    assert {merge.keep_id, *merge.target_ids} == {"cof1", "cof2", "cof3"}


def test_moving_supersedes_the_old_residence_with_links(deps, store):
    say(deps, store, "I live in Boston.", run="r1", day=0)
    say(deps, store, "I moved from Boston to Denver.", run="r2", day=30)
    task = run_dream(deps, store, kinds=[DreamActionKind.UPDATE])
    (update,) = actions(deps, store, task)
    mems = by_text(deps, store)
    boston, denver = mems["Ann lives in Boston."], mems["Ann moved from Boston to Denver."]
    assert update.target_ids == [boston.memory_id] and update.keep_id == denver.memory_id
    # the decision module's confidence for a reported move, above the store's default threshold (0.8)
    assert update.confidence == CONFIDENCE[Evidence.STATE_CHANGE] >= 0.8
    assert "Denver" in update.rationale and "Boston" in update.rationale

    dream.apply_action(deps, store, update.action_id)
    mems = by_text(deps, store)
    boston, denver = mems["Ann lives in Boston."], mems["Ann moved from Boston to Denver."]
    assert denver.status == MemoryStatus.ACTIVE and boston.status == MemoryStatus.SUPERSEDED
    assert boston.superseded_by == denver.memory_id and denver.supersedes == boston.memory_id
    current = hits(deps, store, "Where does Ann live?")
    assert denver.memory_id in [h[0] for h in current] and boston.memory_id not in [h[0] for h in current]
    history = {h[0]: h[1] for h in hits(deps, store, "Where does Ann live?", include_superseded=True)}
    assert history[boston.memory_id] == MemoryStatus.SUPERSEDED


def test_a_different_number_or_person_is_not_a_duplicate(deps, store):
    say(deps, store, "I'm 34 years old.", "My sister lives in Paris.", run="r1", day=0)
    say(deps, store, "I'm 35 years old.", "I live in Paris.", run="r2", day=400)
    task = run_dream(deps, store, kinds=[DreamActionKind.MERGE, DreamActionKind.UPDATE])
    found = actions(deps, store, task)
    assert [a.kind for a in found] == [DreamActionKind.UPDATE]  # the age changed; Paris is two people's
    mems = by_text(deps, store)
    assert found[0].target_ids == [mems["Ann is 34 years old."].memory_id]
    assert found[0].keep_id == mems["Ann is 35 years old."].memory_id


def test_memories_of_different_agents_are_never_folded_together(deps, store):
    say(deps, store, "I'm allergic to peanuts.", agent="bot")
    say(deps, store, "I have a peanut allergy.", agent="travel", day=1)
    task = run_dream(deps, store, kinds=[DreamActionKind.MERGE])
    assert actions(deps, store, task) == []


def test_proposal_mode_changes_nothing_until_applied(deps, store):
    say(deps, store, "I live in Boston.", "I'm allergic to peanuts.", day=0)
    say(deps, store, "I moved from Boston to Denver.", "I have a peanut allergy.", run="r2", day=9)
    before_items, before_hits = items(deps, store, "MEM#"), hits(deps, store, "Where does Ann live?")
    task = run_dream(deps, store, mode=DreamMode.PROPOSAL)
    found = actions(deps, store, task)
    assert {a.kind for a in found} >= {DreamActionKind.UPDATE, DreamActionKind.MERGE, DreamActionKind.EMIT_PROFILE}
    assert all(a.status == DreamActionStatus.PENDING for a in found)
    assert task.stats["pending"] == len(found) and task.stats.get("applied", 0) == 0
    assert items(deps, store, "MEM#") == before_items and items(deps, store, "PROFILE#") == []
    assert hits(deps, store, "Where does Ann live?") == before_hits
    with pytest.raises(NotFound):
        dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT)


def test_safe_auto_applies_only_at_or_above_the_threshold(deps, store):
    stores.create(deps, name="auto", dream_mode=DreamMode.SAFE_AUTO, dream_threshold=0.88)
    say(deps, "auto", "I live in Boston.", "I'm allergic to peanuts.", "I work as a nurse.", day=0)
    say(deps, "auto", "I moved from Boston to Denver.", "I have a peanut allergy.", "I work as a paramedic now.",
        run="r2", day=9)
    task = run_dream(deps, "auto")  # the store's mode and threshold
    assert task.mode == DreamMode.SAFE_AUTO and task.threshold == 0.88
    found, _ = dream.list_actions(deps, "auto", task.task_id)
    assert any(a.confidence >= 0.88 for a in found) and any(a.confidence < 0.88 for a in found)
    for a in found:
        assert a.status == (DreamActionStatus.APPLIED if a.confidence >= 0.88 else DreamActionStatus.PENDING), a
    assert task.stats["applied"] == sum(a.confidence >= 0.88 for a in found)
    mems = {m.text: m for m in deps.repo.iter_memories("auto", APP, TENANT)}
    assert mems["Ann works as a nurse."].status == MemoryStatus.SUPERSEDED  # another value, with a cue: 0.9
    assert mems["Ann lives in Boston."].status == MemoryStatus.SUPERSEDED  # a reported move: 0.9
    assert mems["Ann is allergic to peanuts."].status == MemoryStatus.ACTIVE  # a merge below 0.88: waits
    # overriding per run: a lower threshold applies what the first run left pending
    second = run_dream(deps, "auto", threshold=0.0)
    assert second.stats["applied_earlier"] == sum(a.confidence < 0.88 for a in found)
    assert all(a.status == DreamActionStatus.APPLIED for a in dream.list_actions(deps, "auto", task.task_id)[0])
    mems = {m.text: m for m in deps.repo.iter_memories("auto", APP, TENANT)}
    allergy = (mems["Ann is allergic to peanuts."].status, mems["Ann has a peanut allergy."].status)
    assert MemoryStatus.SUPERSEDED in allergy


def test_undo_restores_table_and_search_exactly(deps, store):
    say(deps, store, "I live in Boston.", "I'm allergic to peanuts.", day=0)
    say(deps, store, "I moved from Boston to Denver.", "I have a peanut allergy.", "I love hiking.", run="r2", day=9)
    before_items = items(deps, store, "MEM#")
    queries = ["Where does Ann live?", "peanut allergy", "hobbies"]
    before = {q: hits(deps, store, q) for q in queries}
    before_all = {q: hits(deps, store, q, include_superseded=True) for q in queries}
    task = run_dream(deps, store, mode=DreamMode.SAFE_AUTO, threshold=0.0)
    applied = actions(deps, store, task)
    assert applied and all(a.status == DreamActionStatus.APPLIED for a in applied)
    assert items(deps, store, "MEM#") != before_items and items(deps, store, "PROFILE#")
    for a in reversed(applied):
        undone = dream.undo_action(deps, store, a.action_id)
        assert undone.status == DreamActionStatus.UNDONE
    assert items(deps, store, "MEM#") == before_items  # every attribute, updated_at included
    assert items(deps, store, "PROFILE#") == []
    assert {q: hits(deps, store, q) for q in queries} == before
    assert {q: hits(deps, store, q, include_superseded=True) for q in queries} == before_all
    with pytest.raises(Conflict) as e:
        dream.undo_action(deps, store, applied[0].action_id)
    assert e.value.code == "action_not_applied"


def test_undo_refuses_when_a_later_change_touched_the_same_memory(deps, store):
    say(deps, store, "I'm allergic to peanuts.", day=0)
    say(deps, store, "I have a peanut allergy.", run="r2", day=1)
    task = run_dream(deps, store, kinds=[DreamActionKind.MERGE], mode=DreamMode.SAFE_AUTO, threshold=0.0)
    (merge,) = actions(deps, store, task)
    memories.update(deps, store, app_id=APP, tenant_id=TENANT, memory_id=merge.keep_id, importance=0.9)
    with pytest.raises(Conflict) as e:
        dream.undo_action(deps, store, merge.action_id)
    assert e.value.code == "undo_conflict"
    assert dream.get_action(deps, store, merge.action_id).status == DreamActionStatus.APPLIED


def test_an_action_about_an_edited_memory_is_stale(deps, store):
    say(deps, store, "I live in Boston.", day=0)
    say(deps, store, "I moved from Boston to Denver.", run="r2", day=5)
    task = run_dream(deps, store, kinds=[DreamActionKind.UPDATE])
    (update,) = actions(deps, store, task)
    memories.update(deps, store, app_id=APP, tenant_id=TENANT, memory_id=update.target_ids[0],
                    text="Ann lives in Boston, Massachusetts.")
    failed = dream.get_action(deps, store, update.action_id)  # by the edit, which leaves no copy of the old text
    assert failed.status == DreamActionStatus.FAILED and "edited" in failed.error
    assert "Boston." not in failed.model_dump_json()
    with pytest.raises(Conflict) as e:
        dream.apply_action(deps, store, update.action_id)
    assert e.value.code == "action_not_pending"
    assert by_text(deps, store)["Ann lives in Boston, Massachusetts."].status == MemoryStatus.ACTIVE


def test_rejected_actions_are_not_proposed_again(deps, store):
    say(deps, store, "I live in Boston.", day=0)
    say(deps, store, "I moved from Boston to Denver.", run="r2", day=5)
    first = run_dream(deps, store, kinds=[DreamActionKind.UPDATE])
    (update,) = actions(deps, store, first)
    assert dream.reject_action(deps, store, update.action_id).status == DreamActionStatus.REJECTED
    with pytest.raises(Conflict):
        dream.apply_action(deps, store, update.action_id)
    again = run_dream(deps, store, kinds=[DreamActionKind.UPDATE])
    assert actions(deps, store, again) == [] and again.stats["repeated"] == 1


def test_expired_plans_are_retired_and_can_come_back(deps, store):
    say(deps, store, "I will visit my grandmother in Rome next week.", day=0)
    (plan,) = by_text(deps, store).values()
    assert plan.memory_type == "plan" and plan.event_time is not None
    task = run_dream(deps, store, kinds=[DreamActionKind.DELETE], mode=DreamMode.SAFE_AUTO)
    (retire,) = actions(deps, store, task)
    assert retire.status == DreamActionStatus.APPLIED and "expired plan" in retire.rationale
    assert deps.repo.get_memory(store, APP, TENANT, plan.memory_id).status == MemoryStatus.DELETED
    assert hits(deps, store, "grandmother in Rome", include_superseded=True) == []
    dream.undo_action(deps, store, retire.action_id)
    assert deps.repo.get_memory(store, APP, TENANT, plan.memory_id) == plan
    assert [h[0] for h in hits(deps, store, "grandmother in Rome")] == [plan.memory_id]


def test_profiles_of_the_tenant_and_of_an_agent(deps, store):
    say(deps, store, "I live in Boston.", "I love hiking in the mountains.", day=0)
    say(deps, store, "I moved from Boston to Denver.", "I work as a nurse.", run="r2", day=9)
    say(deps, store, "I can't stand coffee.", agent="travel", day=10)
    task = run_dream(deps, store, kinds=[DreamActionKind.EMIT_PROFILE], mode=DreamMode.SAFE_AUTO)
    emitted = actions(deps, store, task)
    assert sorted(a.profile.agent_id or "" for a in emitted) == ["", "bot", "travel"]
    tenant = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT)
    values = {(e.name, e.value) for e in tenant.attributes + tenant.preferences}
    assert {("lives in", "Denver"), ("works as", "nurse"), ("likes", "hiking"), ("dislikes", "coffee")} <= values
    residence = next(e for e in tenant.attributes if e.name == "lives in")
    assert residence.previous == ["Boston"] and residence.evidence
    assert tenant.version == 1 and tenant.task_id == task.task_id
    bot = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT, agent_id="bot")
    assert ("dislikes", "coffee") not in {(e.name, e.value) for e in bot.preferences}
    # nothing new: no new profile action; something new: version 2
    assert actions(deps, store, run_dream(deps, store, kinds=[DreamActionKind.EMIT_PROFILE])) == []
    say(deps, store, "My favourite colour is green.", run="r3", day=11)
    run_dream(deps, store, kinds=[DreamActionKind.EMIT_PROFILE], mode=DreamMode.SAFE_AUTO)
    assert dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT).version == 2


def test_a_procedure_solved_twice_becomes_a_skill(deps, store):
    steps = "1. Unplug the router.\n2. Wait 30 seconds.\n3. Plug it back in and wait for the green light."
    for run, day, ask in (("r1", 0, "How do I reset my router?"), ("r2", 3, "How can I reset the router?")):
        ingest.add(deps, store, scope={**SCOPE, "run_id": run}, sync=True, messages=[
            {"role": "user", "content": ask, "created_at": T0 + timedelta(days=day)},
            {"role": "assistant", "content": steps, "created_at": T0 + timedelta(days=day, seconds=5)},
            {"role": "user", "content": "That worked, thanks!", "created_at": T0 + timedelta(days=day, seconds=60)}])
    task = run_dream(deps, store, kinds=[DreamActionKind.EMIT_SKILL])
    (skill,) = actions(deps, store, task)
    assert skill.after.memory_type == "procedure" and skill.after.metadata["skill"] is True
    assert skill.after.text.startswith("How to reset the router: 1. Unplug the router.")
    assert skill.confidence == 0.6 and "2 times" in skill.rationale
    applied = dream.apply_action(deps, store, skill.action_id)
    (created,) = applied.created_ids
    top = search.search(deps, store, query="router reset steps", scope=TENANT_SCOPE, memory_types=["procedure"])
    assert top[0].memory.memory_id == created and len(top[0].memory.evidence) == 3
    assert actions(deps, store, run_dream(deps, store, kinds=[DreamActionKind.EMIT_SKILL])) == []  # known now


def test_dream_runs_on_the_queue_and_a_retry_keeps_its_actions(service, deps, store):
    say(deps, store, "I live in Boston.", day=0)
    say(deps, store, "I moved from Boston to Denver.", run="r2", day=5)
    task = dream.start(deps, store, scope=TENANT_SCOPE)
    assert task.status == TaskStatus.PENDING
    service.drain()
    done = dream.get_task(deps, store, task.task_id)
    assert done.status == TaskStatus.SUCCEEDED and done.stats["proposed"] == len(done.action_ids) > 0
    deps.repo.save_dream_task(done.model_copy(update={"status": TaskStatus.RUNNING}))  # as if it crashed
    rerun = dream.run(deps, store, task.task_id)
    assert rerun.action_ids == done.action_ids and rerun.stats["proposed"] == 0
    assert len(actions(deps, store, rerun)) == len(done.action_ids)


def test_bad_requests(deps, store):
    with pytest.raises(InvalidInput) as e:
        dream.start(deps, store, scope={"app_id": APP})
    assert e.value.field == "scope.tenant_id"
    with pytest.raises(InvalidInput):
        dream.start(deps, store, scope={**TENANT_SCOPE, "agent_id": "a#b"})
    with pytest.raises(NotFound) as e:
        dream.start(deps, "nope", scope=TENANT_SCOPE)
    assert e.value.code == "store_not_found"
    with pytest.raises(NotFound) as e:
        dream.get_action(deps, store, "unknown")
    assert e.value.code == "dream_action_not_found"
    with pytest.raises(NotFound) as e:
        dream.get_task(deps, store, "unknown")
    assert e.value.code == "dream_task_not_found"


def test_safe_auto_dream_settles_what_write_time_did_not_see(deps, store):
    """Memories written with write-time consolidation off (or before it existed): a safe_auto dream at
    the store's default threshold supersedes the changed value and closes the retracted fact, leaves
    two facts that both hold and a twin tenant alone, and undo puts everything back."""
    stores.create(deps, name="auto2", dream_mode=DreamMode.SAFE_AUTO)  # default threshold 0.8
    say(deps, "auto2", "My apartment is in Brooklyn.", "I'm allergic to penicillin.", "I have a dog named Rex.",
        day=0)
    say(deps, "auto2", "My apartment is in Queens.", "I'm not allergic to penicillin after all.",
        "I also adopted a cat named Miso.", run="r2", day=30)
    twin = {**SCOPE, "tenant_id": "twin"}
    ingest.add(deps, "auto2", scope=twin, sync=True, messages=[
        {"role": "user", "name": "Ann", "content": t, "created_at": T0} for t in
        ("My apartment is in Brooklyn.", "I'm allergic to penicillin.")])
    twin_before = {m.memory_id: m for m in deps.repo.iter_memories("auto2", APP, "twin")}
    before = items(deps, "auto2", "MEM#")

    task = run_dream(deps, "auto2", kinds=[DreamActionKind.UPDATE, DreamActionKind.DELETE, DreamActionKind.MERGE])
    assert task.threshold == 0.8
    applied = [a for a in dream.list_actions(deps, "auto2", task.task_id)[0] if a.status == DreamActionStatus.APPLIED]
    assert sorted(a.kind for a in applied) == [DreamActionKind.DELETE, DreamActionKind.UPDATE]
    mems = {m.text: m for m in deps.repo.iter_memories("auto2", APP, TENANT)}
    brooklyn, queens = mems["Ann's apartment is in Brooklyn."], mems["Ann's apartment is in Queens."]
    assert brooklyn.status == MemoryStatus.SUPERSEDED and brooklyn.superseded_by == queens.memory_id
    assert brooklyn.valid_to == queens.observed_at
    allergy = mems["Ann is allergic to penicillin."]
    retraction = next(m for t, m in mems.items() if "not allergic" in t)
    assert allergy.status == MemoryStatus.SUPERSEDED and allergy.superseded_by == retraction.memory_id
    assert retraction.status == MemoryStatus.ACTIVE  # the retraction itself is kept
    assert all(m.status == MemoryStatus.ACTIVE for t, m in mems.items() if "Rex" in t or "Miso" in t)
    current = [h[0] for h in hits(deps, "auto2", "Where is Ann's apartment?")]
    assert queens.memory_id in current and brooklyn.memory_id not in current
    assert {m.memory_id: m for m in deps.repo.iter_memories("auto2", APP, "twin")} == twin_before

    for a in reversed(applied):
        dream.undo_action(deps, "auto2", a.action_id)
    assert items(deps, "auto2", "MEM#") == before


def test_a_profile_an_earlier_dream_proposed_cannot_roll_back_a_later_dreams(deps, store):
    """A dream trial: in proposal mode each dream proposes a profile and the older ones stay pending; applying the
    oldest after the newest rolled the profile back."""
    say(deps, store, "My favourite number is 1.", day=0)
    first = run_dream(deps, store, kinds=[DreamActionKind.EMIT_PROFILE])
    say(deps, store, "I love hiking in the mountains.", run="r2", day=5)
    second = run_dream(deps, store, kinds=[DreamActionKind.EMIT_PROFILE])
    (older,) = [a for a in actions(deps, store, first) if a.profile.agent_id is None]
    (newer,) = [a for a in actions(deps, store, second) if a.profile.agent_id is None]
    dream.apply_action(deps, store, newer.action_id)
    with pytest.raises(Conflict) as stale:
        dream.apply_action(deps, store, older.action_id)
    assert stale.value.code == "stale_action"
    tenant = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT)
    assert tenant.task_id == second.task_id and ("likes", "hiking") in {(e.name, e.value) for e in tenant.preferences}


def test_a_dream_given_up_on_while_it_ran_ends_succeeded_with_its_actions(deps, store):
    """The queue's last delivery gave the job up (FAILED) while an earlier one still dreamed: its actions are
    recorded and applied, so the task says SUCCEEDED and names them — not FAILED with no action to audit or undo
    (a regression trial; an extraction's and a summary's task do the same)."""
    say(deps, store, "I live in Boston.", day=0)
    say(deps, store, "I moved from Boston to Denver.", run="r2", day=5)
    task = dream.start(deps, store, scope=TENANT_SCOPE, mode=DreamMode.SAFE_AUTO)

    class GivenUpMeanwhile:
        def point(self, name):
            if name == "dream.after_actions":
                assert dream.fail(deps, store, task.task_id, "gave up after 5 deliveries").status == TaskStatus.FAILED

    deps.faults = GivenUpMeanwhile()
    done = dream.run(deps, store, task.task_id)
    stored = dream.get_task(deps, store, task.task_id)
    assert done.status == stored.status == TaskStatus.SUCCEEDED and stored.error is None
    assert stored.action_ids and stored.action_ids == [a.action_id for a in actions(deps, store, stored)]
