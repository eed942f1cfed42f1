"""Dream with an LLM: the prompt it gets, the schema it answers in, and what the engine keeps of the answer.

The LLM is a scripted fake implementing the LLM port: it answers from the numbered memories it finds in
the prompt, the way a model following the schema would, and records every call.
"""

import re
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.errors import NotFound
from memlane.domain.models import DreamActionKind, DreamActionStatus, DreamMode, MemoryStatus
from memlane.prompts import dream as dream_prompt
from memlane.services import dream, ingest, search, stores

APP, TENANT = "app", "u1"
SCOPE = {"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": "r1"}
T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)


class ScriptedLLM:
    """Answers each call with `script(prompt, numbered memories)` validated against the response model."""

    name = "scripted"

    def __init__(self, dream_answer, profile_answer=None):
        self.dream_answer, self.profile_answer = dream_answer, profile_answer
        self.calls: list[tuple[str, str, type]] = []

    def generate(self, *, system, prompt, response_model):
        self.calls.append((system, prompt, response_model))
        numbered = {int(n): text for n, text in re.findall(r"^\[m(\d+)\] \([^)]*\) (.*)$", prompt, re.M)}
        if response_model is dream_prompt.DreamResult:
            return response_model.model_validate(self.dream_answer(numbered))
        assert response_model is dream_prompt.ProfileResult
        return response_model.model_validate(self.profile_answer(numbered))





def ref(numbered, fragment):
    return next(n for n, text in numbered.items() if fragment in text)


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def say(deps, store, text, run, day):
    ingest.add(deps, store, scope={**SCOPE, "run_id": run}, sync=True,
               messages=[{"role": "user", "name": "Ann", "content": text, "created_at": T0 + timedelta(days=day)}])


def test_llm_proposals_are_checked_recorded_and_applied(deps, store):
    say(deps, store, "I'm allergic to peanuts.", "r1", 0)
    say(deps, store, "I have a peanut allergy.", "r1", 1)  # one run: the survivor takes the new text (see
    say(deps, store, "I work as a nurse at the city hospital.", "r3", 2)  # test_run_delete_llm_merges.py)

    def answer(numbered):
        a, b = ref(numbered, "allergic"), ref(numbered, "peanut allergy")
        nurse = ref(numbered, "nurse")
        return {"actions": [
            {"kind": "MERGE", "targets": [a, b], "keep": b, "text": "Ann is allergic to peanuts.",
             "confidence": 0.95, "rationale": "same allergy stated twice"},
            {"kind": "DELETE", "targets": [99], "confidence": 0.9, "rationale": "no such memory"},  # dropped
            {"kind": "UPDATE", "targets": [a], "keep": nurse, "confidence": 0.9, "rationale": "takes a memory "
             "an earlier action took"},  # dropped
            {"kind": "NOOP", "targets": [nurse], "confidence": 0.9, "rationale": "unrelated"},
        ], "profile": {"subject": "Ann", "attributes": [
            {"name": "occupation", "value": "nurse", "evidence": [nurse], "confidence": 0.9}]}}

    def profile(numbered):
        return {"profile": {"subject": "Ann", "summary": "Ann is a nurse with a peanut allergy.", "attributes": [
            {"name": "occupation", "value": "nurse", "evidence": [ref(numbered, "nurse")], "confidence": 0.9},
            {"name": "allergies", "value": "peanuts", "evidence": [ref(numbered, "peanut")]}]}}

    llm = ScriptedLLM(answer, profile)
    deps.llm = llm
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot"}, sync=True)
    assert task.engine == "llm" and task.stats["noop"] == 1

    (system, text, model), (_, profile_text, profile_model) = llm.calls
    assert model is dream_prompt.DreamResult and profile_model is dream_prompt.ProfileResult
    assert system == dream_prompt.SYSTEM and "Ann is allergic to peanuts." in text and "[m3]" in text
    assert "Also give `profile`" in text  # the agent's own profile is asked for in the same call

    found, _ = dream.list_actions(deps, store, task.task_id)
    kinds = [a.kind for a in found]
    assert kinds == [DreamActionKind.MERGE, DreamActionKind.EMIT_PROFILE, DreamActionKind.EMIT_PROFILE]
    merge = found[0]
    assert merge.confidence == 0.95 and merge.rationale == "same allergy stated twice"
    assert {p.agent_id for p in (found[1].profile, found[2].profile)} == {"bot", None}

    dream.apply_action(deps, store, merge.action_id)
    keep = deps.repo.get_memory(store, APP, TENANT, merge.keep_id)
    gone = deps.repo.get_memory(store, APP, TENANT, merge.target_ids[0])
    assert keep.text == "Ann is allergic to peanuts." and keep.status == MemoryStatus.ACTIVE
    assert gone.status == MemoryStatus.SUPERSEDED and gone.superseded_by == keep.memory_id
    top = search.search(deps, store, query="peanut", scope={"app_id": APP, "tenant_id": TENANT})
    assert [h.memory.memory_id for h in top if "peanut" in h.memory.text] == [keep.memory_id]

    tenant_profile = dream.apply_action(deps, store, next(a for a in found[1:] if a.profile.agent_id is None).action_id)
    assert tenant_profile.status == DreamActionStatus.APPLIED
    p = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT)
    assert p.summary == "Ann is a nurse with a peanut allergy."
    assert {(e.name, e.value) for e in p.attributes} == {("occupation", "nurse"), ("allergies", "peanuts")}
    assert all(e.evidence for e in p.attributes)


def test_llm_new_statements_and_skills_land_in_the_run_of_their_evidence(deps, store):
    ingest.add(deps, store, scope={**SCOPE, "run_id": "r9"}, messages=[
        {"role": "user", "content": "btw my cat is called Miso", "created_at": T0}])

    def answer(numbered):
        return {"actions": [
            {"kind": "ADD", "text": "Ann has a cat called Miso.", "memory_type": "fact", "evidence": [1],
             "confidence": 0.85, "rationale": "stated in the conversation, missed by extraction"},
            {"kind": "EMIT_SKILL", "text": "How to book a vet visit: 1. Call. 2. Confirm.", "evidence": [1],
             "confidence": 0.5, "rationale": "seen before"}]}

    deps.llm = ScriptedLLM(answer, lambda n: {"profile": {"subject": "Ann"}})
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, sync=True, mode=DreamMode.SAFE_AUTO,
                       threshold=0.8, kinds=[DreamActionKind.ADD, DreamActionKind.EMIT_SKILL])
    found, _ = dream.list_actions(deps, store, task.task_id)
    add, skill = found
    assert add.status == DreamActionStatus.APPLIED and skill.status == DreamActionStatus.PENDING
    (created,) = add.created_ids
    m = deps.repo.get_memory(store, APP, TENANT, created)
    assert m.scope.run_id == "r9" and m.evidence and m.metadata["dream_action"] == add.action_id
    assert skill.after.memory_type == "procedure" and skill.after.metadata == {"skill": True}
    dream.undo_action(deps, store, add.action_id)
    with pytest.raises(NotFound):  # the memory it created is gone again
        deps.repo.get_memory(store, APP, TENANT, created)


def test_an_llm_failure_fails_the_task(deps, store):
    from memlane.domain.errors import DependencyFailed
    from memlane.domain.models import TaskStatus

    say(deps, store, "I'm allergic to peanuts.", "r1", 0)
    say(deps, store, "I have a peanut allergy.", "r2", 1)

    def broken(numbered):
        raise DependencyFailed("model unavailable", code="llm_failed")

    deps.llm = ScriptedLLM(broken)
    with pytest.raises(DependencyFailed):
        dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, sync=True)
    (task,), _ = dream.list_tasks(deps, store, app_id=APP, tenant_id=TENANT, limit=10, cursor=None)
    assert task.status == TaskStatus.FAILED and "llm_failed" in task.error


def test_what_the_model_copies_from_a_run_citing_nothing_of_it_is_not_kept(deps, store):
    """A trial of the model boundary: a dream's model copied a run's secret into an ADD citing no turn, a skill citing
    a turn not shown, and profile attributes and a line citing no memory; all were applied with no evidence, so the
    run's deletion (which follows evidence) found none of them, and the secret stayed in memories and profiles."""
    from memlane.services import erase

    say(deps, store, "My locker code is 5151.", "olive", 0)
    say(deps, store, "I work as a nurse at the city hospital.", "r3", 1)

    def answer(numbered):
        return {"actions": [
            {"kind": "ADD", "text": "Ann's locker code is 5151.", "evidence": [], "confidence": 0.99,
             "rationale": "r"},
            {"kind": "EMIT_SKILL", "text": "Opening the locker: enter 5151.", "evidence": [999], "confidence": 0.99,
             "rationale": "r"}],
            "profile": {"subject": "Ann", "summary": "Ann (locker 5151) is a nurse.", "attributes": [
                {"name": "locker", "value": "5151", "evidence": [], "confidence": 0.99},
                {"name": "occupation", "value": "nurse", "evidence": [ref(numbered, "nurse")], "confidence": 0.9}]}}

    def profile(numbered):
        return {"profile": {"subject": "Ann", "summary": "Ann's locker code is 5151.", "attributes": [
            {"name": "locker", "value": "5151", "evidence": [], "confidence": 0.99},
            {"name": "occupation", "value": "nurse", "evidence": [ref(numbered, "nurse")], "confidence": 0.9}]}}

    deps.llm = ScriptedLLM(answer, profile)
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot"}, sync=True,
                mode=DreamMode.SAFE_AUTO, threshold=0.0)
    for agent in (None, "bot"):
        p = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT, agent_id=agent)
        assert [(e.name, e.value) for e in p.attributes] == [("occupation", "nurse")]
        assert "5151" not in p.summary and "nurse" in p.summary
    erase.delete_run(deps, store, scope={**SCOPE, "run_id": "olive"})
    left = [m.text for m in deps.repo.iter_memories(store, APP, TENANT)]
    assert left and not [t for t in left if "5151" in t]


def test_a_profile_entry_copying_a_memory_it_does_not_cite_goes_with_that_memory(deps, store):
    """A model cited the nurse memory for an attribute whose value copied the locker code of another run's memory: the
    entry rested on the nurse memory alone, so deleting the locker's run left the code in the profile. An entry now
    also rests on every memory shown whose words its value carries that its cited memories do not."""
    from memlane.services import erase

    say(deps, store, "My locker code is 5151.", "olive", 0)
    say(deps, store, "I work as a nurse at the city hospital.", "r3", 1)

    def profile(numbered):
        return {"profile": {"subject": "Ann", "attributes": [
            {"name": "occupation", "value": "nurse (locker 5151)", "evidence": [ref(numbered, "nurse")],
             "confidence": 0.9},
            {"name": "workplace", "value": "city hospital", "evidence": [ref(numbered, "nurse")], "confidence": 0.9}]}}

    deps.llm = ScriptedLLM(lambda n: {"actions": []}, profile)
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, sync=True, mode=DreamMode.SAFE_AUTO,
                threshold=0.0)
    before = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT)
    assert "nurse (locker 5151)" in [e.value for e in before.attributes]  # the model's entry, as it wrote it
    erase.delete_run(deps, store, scope={**SCOPE, "run_id": "olive"})
    after = dream.get_profile(deps, store, app_id=APP, tenant_id=TENANT)
    assert "5151" not in after.model_dump_json()
    assert "nurse" in after.summary  # rebuilt from what is left


@pytest.mark.parametrize("how,code", [("add", "5151"), ("merge", "5151"), ("add", "5,151"), ("add", "51-51"),
                                      ("add", "\uff15\uff11\uff15\uff11"), ("add", "51\u200b51")])
def test_a_dream_memory_copying_words_of_a_run_it_does_not_cite_goes_with_that_run(deps, store, how, code):
    """A trial of the model boundary: an ADD citing run r3's turn, or a MERGE of r3's memories, wrote the locker code
    of run "olive" that the model was shown; it stood on r3 alone, so deleting olive left the code in a memory of r3.
    A text resting on what it cites also rests on the runs of what else shown it copies words from."""
    from memlane.services import erase

    say(deps, store, "My locker code is 5151.", "olive", 0)
    say(deps, store, "I work as a nurse at the city hospital.", "r3", 1)
    say(deps, store, "I love the night shifts at the city hospital.", "r3", 2)

    def answer(numbered):
        if how == "add":
            turn = 2  # [s2]: the first nurse turn (turns are listed oldest first)
            return {"actions": [{"kind": "ADD", "text": f"Ann's locker code is {code} at the city hospital.",
                                 "evidence": [turn], "confidence": 0.99, "rationale": "r"}]}
        a, b = ref(numbered, "nurse"), ref(numbered, "night shifts")
        return {"actions": [{"kind": "MERGE", "targets": [a, b], "keep": b, "confidence": 0.99, "rationale": "r",
                             "text": f"Ann is a nurse at the city hospital (locker code {code})."}]}

    deps.llm = ScriptedLLM(answer, lambda n: {"profile": {"subject": "Ann"}})
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot"}, sync=True,
                mode=DreamMode.SAFE_AUTO, threshold=0.0)
    current = [m.text for m in deps.repo.iter_memories(store, APP, TENANT) if m.status == MemoryStatus.ACTIVE]
    assert any(code in t and "hospital" in t for t in current)  # the model's memory was applied
    erase.delete_run(deps, store, scope={**SCOPE, "run_id": "olive"})
    left = [m.text for m in deps.repo.iter_memories(store, APP, TENANT)]
    assert left and not [t for t in left if code in t]
    assert any("nurse" in t for t in left)


def test_a_dream_memory_sharing_only_common_words_with_another_run_stays_when_that_run_goes(deps, store):
    """A regression trial of the rule above in its first form: any word in common tied a dream's text to a run —
    "user" (every memory's, never a first-person turn's), "likes", "2024" — so deleting one thread took back eleven
    memories drawn from others. Only a mark of the other run's own (a number, a name, three content words) ties it
    now."""
    from memlane.services import erase

    def said(text, run, day):  # no speaker's name: the memories say "User ..."
        ingest.add(deps, store, scope={**SCOPE, "run_id": run}, sync=True,
                   messages=[{"role": "user", "content": text, "created_at": T0 + timedelta(days=day)}])

    said("I work night shifts as a nurse and I usually sleep until noon in 2024.", "job", 0)
    said("Please log my rent payment of $2,100 for March, I usually pay early in 2024.", "bank", 1)

    def answer(numbered):
        return {"actions": [{"kind": "ADD", "text": "User usually sleeps until noon after night shifts in 2024.",
                             "evidence": [1], "confidence": 0.99, "rationale": "r"}]}  # [s1]: the job turn

    deps.llm = ScriptedLLM(answer, lambda n: {"profile": {"subject": "User"}})
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot"}, sync=True,
                mode=DreamMode.SAFE_AUTO, threshold=0.0)
    added = [m for m in deps.repo.iter_memories(store, APP, TENANT) if "after night shifts" in m.text]
    assert [(m.scope.run_id, m.drawn_from) for m in added] == [("job", [])]
    erase.delete_run(deps, store, scope={**SCOPE, "run_id": "bank"})
    assert deps.repo.get_memories(store, APP, TENANT, [added[0].memory_id])
