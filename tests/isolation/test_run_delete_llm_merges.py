"""A dream with an LLM may merge memories of two runs into one text that says what both said ("allergic to
peanuts" + "carries an EpiPen"). Deleting either run must take that text back: the run's words stay in no
current memory, no index document and no search result, and what the other run said is current again as it
said it. Before, the merge rewrote the survivor in place and a deletion of the other run left its words there."""

import json
import re

import pytest

from memlane.domain.errors import Conflict
from memlane.domain.models import AccessPolicy, DreamActionKind, DreamActionStatus, DreamMode, MemoryStatus
from memlane.domain.scope import ScopeFilter
from memlane.ports import IndexQuery
from memlane.prompts import dream as dream_prompt
from memlane.repository import tenant_pk
from memlane.services import dream, erase, explicit, ingest, search, stores

APP, TENANT = "app", "u1"
MERGED = "Ann is allergic to peanuts and carries an EpiPen."


class ScriptedLLM:
    """Answers the dream prompt with `actions(numbered memories, numbered turns)`; the profile prompt with an
    empty profile."""

    name = "scripted"

    def __init__(self, actions, meanwhile=lambda: None):
        self.actions, self.meanwhile = actions, meanwhile  # `meanwhile`: what happens while the model answers
        self.prompts: list[str] = []

    def generate(self, *, system, prompt, response_model):
        self.prompts.append(prompt)
        if response_model is dream_prompt.ProfileResult:
            return response_model.model_validate({"profile": {"subject": "Ann"}})
        memories = {int(n): t for n, t in re.findall(r"^\[m(\d+)\] \([^)]*\) (.*)$", prompt, re.M)}
        turns = {int(n): t for n, t in re.findall(r"^\[s(\d+)\] (.*)$", prompt, re.M)}
        self.meanwhile()
        return response_model.model_validate({"actions": self.actions(memories, turns)})


def merging(fragments: tuple[str, str], keep: str) -> ScriptedLLM:
    """One MERGE of the memories that hold `fragments`, kept as the one that holds `keep`, into MERGED."""
    def actions(memories, turns):
        ref = {f: next(n for n, t in memories.items() if f in t) for f in (*fragments, keep)}
        return [{"kind": "MERGE", "targets": [ref[f] for f in fragments], "keep": ref[keep], "text": MERGED,
                 "confidence": 0.95, "rationale": "one allergy, said in two threads"}]
    return ScriptedLLM(actions)


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def run_of(run):
    return {"app_id": APP, "tenant_id": TENANT, "agent_id": "assistant", "run_id": run}


def merged(deps, store, keep: str) -> dict[str, str]:
    """Two runs' memories, merged by an LLM dream into one text; returns their ids by run."""
    explicit.write(deps, store, scope=run_of("a"), memories=[{"text": "Ann is allergic to peanuts.", "memory_id": "a1"}])
    explicit.write(deps, store, scope=run_of("b"),
                   memories=[{"text": "Ann carries an EpiPen for her peanut allergy.", "memory_id": "b1"}])
    deps.llm = merging(("allergic to peanuts", "EpiPen"), keep=keep)
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, kinds=[DreamActionKind.MERGE],
                       sync=True)
    assert task.engine == "llm"
    (merge,) = [a for a in dream.list_actions(deps, store, task.task_id)[0] if a.kind == DreamActionKind.MERGE]
    dream.apply_action(deps, store, merge.action_id)
    top = search.search(deps, store, query="peanut allergy", scope={"app_id": APP, "tenant_id": TENANT}, top_k=5)
    assert [h.memory.text for h in top] == [MERGED]
    return {"a": "a1", "b": "b1"}


def texts(deps, store, query: str) -> tuple[set[str], set[str]]:
    """Every memory text of the tenant in the table (any status), and every text the index finds for `query`."""
    table = {m.text for m in deps.repo.iter_memories(store, APP, TENANT)}
    found = deps.index.search(store, IndexQuery(scope=ScopeFilter(app_id=APP, tenant_id=TENANT), text=query,
                                                vector=deps.embedder.embed([query])[0], k=20))
    ids = {h.memory_id for h in [*found.keyword, *found.vector]}
    indexed = {m.text for m in deps.repo.get_memories(store, APP, TENANT, sorted(ids))}
    return table, indexed | ({"<document of a memory no longer in the table>"} if len(indexed) < len(ids) else set())


@pytest.mark.parametrize("keep", ["allergic to peanuts", "EpiPen"], ids=["kept-in-the-run-that-stays",
                                                                          "kept-in-the-deleted-run"])
def test_deleting_a_run_takes_back_an_llm_merge_that_drew_on_it(deps, store, keep):
    ids = merged(deps, store, keep)
    erase.delete_run(deps, store, scope=run_of("b"))

    table, indexed = texts(deps, store, "EpiPen peanut allergy")
    assert table == {"Ann is allergic to peanuts."}  # no copy of run b's words, current or in the history
    assert indexed <= table
    back = deps.repo.get_memory(store, APP, TENANT, ids["a"])
    assert back.status == MemoryStatus.ACTIVE and back.superseded_by is None and back.valid_to is None
    top = search.search(deps, store, query="peanut allergy", scope={"app_id": APP, "tenant_id": TENANT}, top_k=5)
    assert [h.memory.memory_id for h in top] == [ids["a"]]


def test_deleting_the_run_the_merge_was_kept_in_gives_the_other_run_its_own_words_back(deps, store):
    ids = merged(deps, store, keep="allergic to peanuts")
    erase.delete_run(deps, store, scope=run_of("a"))

    table, indexed = texts(deps, store, "EpiPen peanut allergy")
    assert table == {"Ann carries an EpiPen for her peanut allergy."}
    assert indexed <= table
    top = search.search(deps, store, query="peanut allergy", scope={"app_id": APP, "tenant_id": TENANT}, top_k=5)
    assert [h.memory.memory_id for h in top] == [ids["b"]]


def test_a_merge_within_one_run_still_rewrites_its_survivor(deps, store):
    """Nothing of another run in the text: the survivor takes it in place, as before."""
    explicit.write(deps, store, scope=run_of("a"), memories=[
        {"text": "Ann is allergic to peanuts.", "memory_id": "a1"},
        {"text": "Ann carries an EpiPen for her peanut allergy.", "memory_id": "a2"}])
    deps.llm = merging(("allergic to peanuts", "EpiPen"), keep="allergic to peanuts")
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, kinds=[DreamActionKind.MERGE],
                       sync=True)
    (merge,) = dream.list_actions(deps, store, task.task_id)[0]
    assert merge.keep_id == "a1" and merge.target_ids == ["a2"]
    dream.apply_action(deps, store, merge.action_id)
    assert deps.repo.get_memory(store, APP, TENANT, "a1").text == MERGED


def two_runs_said(deps, store):
    for run, text in (("a", "I'm allergic to peanuts."), ("b", "I always carry an EpiPen now.")):
        ingest.add(deps, store, scope=run_of(run), sync=True, messages=[{"role": "user", "name": "Ann", "content": text}])


def adds_from_both(memories, turns):
    """One ADD whose evidence is the turns of both runs (none if the prompt shows neither)."""
    evidence = [n for n, t in turns.items() if "peanut" in t or "EpiPen" in t]
    return [{"kind": "ADD", "text": MERGED, "evidence": evidence, "confidence": 0.95,
             "rationale": "the two turns say one thing together"}] if evidence else []


def held_anywhere(deps, store, words: str) -> list[str]:
    """The sort keys of the tenant's items that still hold `words` (memories, tasks, dream actions, profiles)."""
    items = deps.table.query(tenant_pk(store, APP, TENANT), limit=1000).items
    return [i["sk"] for i in items if words in json.dumps(i, default=str)]


def proposed_add_from_both(deps, store):
    """Both runs said their part; a dream proposes one ADD from both runs' turns (pending)."""
    two_runs_said(deps, store)
    deps.llm = ScriptedLLM(adds_from_both)
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, kinds=[DreamActionKind.ADD],
                       sync=True)
    (add,) = dream.list_actions(deps, store, task.task_id)[0]
    return add


def test_a_new_statement_drawn_from_two_runs_goes_with_either(deps, store):
    """An ADD whose evidence is turns of two runs lands in the run of the last; deleting the other takes it too."""
    add = proposed_add_from_both(deps, store)
    dream.apply_action(deps, store, add.action_id)
    (created,) = dream.get_action(deps, store, add.action_id).created_ids
    made = deps.repo.get_memory(store, APP, TENANT, created)
    assert made.text == MERGED and made.scope.run_id == "b"

    erase.delete_run(deps, store, scope=run_of("a"))
    table, indexed = texts(deps, store, "EpiPen peanut allergy")
    assert MERGED not in table and indexed <= table


def test_a_pending_statement_drawn_from_a_deleted_run_keeps_no_copy_and_cannot_be_applied(deps, store):
    add = proposed_add_from_both(deps, store)
    assert add.status == DreamActionStatus.PENDING and [s.run_id for s in add.after.drawn_from] == ["a"]

    erase.delete_run(deps, store, scope=run_of("a"))
    assert held_anywhere(deps, store, "allergic to peanuts") == []
    assert dream.get_action(deps, store, add.action_id).status == DreamActionStatus.FAILED
    with pytest.raises(Conflict):
        dream.apply_action(deps, store, add.action_id)
    assert held_anywhere(deps, store, "allergic to peanuts") == []


def test_a_run_deleted_while_a_dream_adds_from_it_leaves_nothing_of_it(deps, store):
    """SAFE_AUTO: run a is deleted while the model answers; the statement it adds from a's and b's turns goes."""
    two_runs_said(deps, store)
    deleted = []

    def delete_a():
        if not deleted:
            deleted.append(erase.delete_run(deps, store, scope=run_of("a")))

    deps.llm = ScriptedLLM(adds_from_both, meanwhile=delete_a)
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                kinds=[DreamActionKind.ADD], sync=True)
    assert deleted and held_anywhere(deps, store, "allergic to peanuts") == []


def delete_run_applying(deps, store, monkeypatch, *, run: str, action_id: str) -> None:
    """Delete the run, the dream action applied meanwhile: at the deletion's first index delete, after its listing
    of the tenant's memories and before they go."""
    index_delete, applied = deps.index.delete, []

    def apply_meanwhile(*args, **kwargs):
        if not applied:
            applied.append(dream.apply_action(deps, store, action_id))
        return index_delete(*args, **kwargs)

    monkeypatch.setattr(deps.index, "delete", apply_meanwhile)
    erase.delete_run(deps, store, scope=run_of(run))
    assert applied


def test_a_merge_applied_while_its_run_is_deleted_goes_with_it(deps, store, monkeypatch):
    """The merge commits after the deletion listed the tenant's memories, before they went."""
    explicit.write(deps, store, scope=run_of("a"), memories=[{"text": "Ann is allergic to peanuts.", "memory_id": "a1"}])
    explicit.write(deps, store, scope=run_of("b"),
                   memories=[{"text": "Ann carries an EpiPen for her peanut allergy.", "memory_id": "b1"}])
    deps.llm = merging(("allergic to peanuts", "EpiPen"), keep="allergic to peanuts")
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, kinds=[DreamActionKind.MERGE],
                       sync=True)
    (merge,) = dream.list_actions(deps, store, task.task_id)[0]
    delete_run_applying(deps, store, monkeypatch, run="b", action_id=merge.action_id)
    table, indexed = texts(deps, store, "EpiPen peanut allergy")
    assert table == {"Ann is allergic to peanuts."} and indexed <= table
    assert deps.repo.get_memory(store, APP, TENANT, "a1").status == MemoryStatus.ACTIVE


def test_a_dream_reads_nothing_of_a_thread_that_stores_nothing(deps, store):
    """A `none` thread's turns stay out of long-term memory: not in the model's prompt, so in no memory."""
    ingest.add(deps, store, scope=run_of("private"), sync=True, access_policy=AccessPolicy.NONE,
               messages=[{"role": "user", "name": "Ann", "content": "Off the record: I'm allergic to peanuts."}])
    ingest.add(deps, store, scope=run_of("work"), sync=True,
               messages=[{"role": "user", "name": "Ann", "content": "Please book the team lunch for Friday."}])
    deps.llm = llm = ScriptedLLM(adds_from_both)
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, mode=DreamMode.SAFE_AUTO, threshold=0.0,
                kinds=[DreamActionKind.ADD], sync=True)
    assert llm.prompts and not any("peanut" in p for p in llm.prompts)
    assert not [m for m in deps.repo.iter_memories(store, APP, TENANT) if "peanut" in m.text]


def test_an_add_that_makes_the_run_again_mid_deletion_keeps_its_memory(service, deps, store, monkeypatch):
    """The deletion's second look takes what is drawn from the run, not what a new add of it wrote since."""
    ingest.add(deps, store, scope=run_of("a"), messages=[{"role": "user", "content": "I adopted a beagle named Max."}])
    service.drain()
    deleted_as_read, again = erase._deleted_as_read, []

    def meanwhile(*args):
        gone = deleted_as_read(*args)
        if not again:  # once the run's memories went: a new add makes the run again, and its job extracts
            again.append(ingest.add(deps, store, scope=run_of("a"),
                                    messages=[{"role": "user", "content": "I live in Lisbon and work as a nurse."}]))
            service.drain()
        return gone

    monkeypatch.setattr(erase, "_deleted_as_read", meanwhile)
    counts = erase.delete_run(deps, store, scope=run_of("a"))
    assert again and counts["memories"] == 1
    left = [m.text for m in deps.repo.iter_memories(store, APP, TENANT)]
    assert len(left) == 1 and "Lisbon" in left[0] and "beagle" not in left[0]


def test_a_statement_a_dream_makes_of_the_run_itself_mid_deletion_goes_with_it(deps, store, monkeypatch):
    """A dream's ADD standing on the run's own turns (no other run: nothing drawn from), applied after the
    deletion listed the tenant's memories: it stands on the deleted turns, and goes with them."""
    ingest.add(deps, store, scope=run_of("a"), sync=True,
               messages=[{"role": "user", "name": "Ann", "content": "I'm allergic to peanuts, badly."}])
    deps.llm = ScriptedLLM(lambda memories, turns: [
        {"kind": "ADD", "text": "Ann needs an EpiPen for her peanut allergy.", "confidence": 0.95, "rationale": "said",
         "evidence": [n for n, t in turns.items() if "peanut" in t]}])
    task = dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, kinds=[DreamActionKind.ADD],
                       sync=True)
    (add,) = dream.list_actions(deps, store, task.task_id)[0]
    assert add.after.scope.run_id == "a" and not add.after.drawn_from
    delete_run_applying(deps, store, monkeypatch, run="a", action_id=add.action_id)
    table, indexed = texts(deps, store, "EpiPen peanut allergy")
    assert table == set() and indexed == set()
