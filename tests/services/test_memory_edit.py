"""A memory's edit (PATCH): the index follows the table even when the process dies between the two, and a model that
fails before anything is written changes nothing.

An AWS-path trial (session 31): the Search Lambda committed the edit to the table, then died (or its embedding call
was throttled, answered 500) before the index write: the memory's old words — a password the edit took out — stayed
findable for good, its new ones never were; nothing was queued to repair it."""

import pytest

from memlane.domain.errors import Retryable
from memlane.faults import Faults
from memlane.services import explicit, memories, search, stores

SCOPE = {"app_id": "app", "tenant_id": "ann", "agent_id": "bot", "run_id": "r1"}


class Died(Exception):
    pass


def _die(name):
    raise Died(name)


def _found(deps, words):
    hits = search.search(deps, "demo", query=words, scope={"app_id": "app", "tenant_id": "ann"}, top_k=5,
                         recipe="keyword")
    return [h.memory.memory_id for h in hits]


@pytest.fixture()
def written(service, deps):
    stores.create(deps, name="demo")
    explicit.write(deps, "demo", scope=SCOPE, memories=[{"text": "My wifi password is hunter2zebra.",
                                                          "memory_id": "wifi"}])
    return deps


def test_an_edit_whose_process_dies_before_the_index_is_indexed_by_its_job(service, written):
    deps = written
    deps.faults = Faults("memory.after_edit", crash=_die)
    with pytest.raises(Died):
        memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id="wifi",
                        text="The wifi password was reset and changed; ask the landlord.")
    deps.faults = Faults()
    assert _found(deps, "hunter2zebra") == ["wifi"]  # the index as the dying process left it
    service.drain()  # the edit's job
    assert _found(deps, "hunter2zebra") == [] and _found(deps, "landlord") == ["wifi"]


def test_an_edit_whose_model_fails_changes_nothing(written, monkeypatch):
    deps = written

    def throttled(texts):
        raise Retryable("ThrottlingException", code="retryable")

    monkeypatch.setattr(deps.embedder, "embed", throttled)
    with pytest.raises(Retryable):
        memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id="wifi", text="Ask the landlord.")
    monkeypatch.undo()
    held = memories.get(deps, "demo", app_id="app", tenant_id="ann", memory_id="wifi")
    assert held.text == "My wifi password is hunter2zebra." and _found(deps, "hunter2zebra") == ["wifi"]


def test_an_edit_whose_index_fails_after_its_commit_is_answered_as_made(service, written, monkeypatch):
    """As an explicit write's (a trial, session 32): the table changed, the index refused (a full disk): answered 503,
    the edit was made all the same. It is answered as made, and its job indexes it."""
    deps = written

    def full(*args, **kwargs):
        raise Retryable("the data directory's disk is full", code="storage_full")

    monkeypatch.setattr(deps.index, "upsert", full)
    edited = memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id="wifi", text="Ask the landlord.")
    monkeypatch.undo()
    assert edited.text == "Ask the landlord."
    service.drain()
    assert _found(deps, "hunter2zebra") == [] and _found(deps, "landlord") == ["wifi"]


def test_an_edit_that_takes_words_out_leaves_none_of_them_on_disk(service, written):
    """A trial (session 32): the old text of an edited memory stayed in the files' write-ahead logs for as long as the
    server ran (a password the edit took out); a deletion's compaction never ran for an edit."""
    from pathlib import Path

    deps = written
    data_dir = Path(deps.table.path).parent
    memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id="wifi", text="Ask the landlord.")
    service.drain()
    assert [p.name for p in sorted(data_dir.rglob("*")) if p.is_file() and b"hunter2zebra" in p.read_bytes()] == []


def test_an_edit_whose_job_is_not_sent_after_its_commit_is_answered_as_made_and_indexed(written, monkeypatch):
    """As an explicit write's: the edit committed, its job's send failed (SQS), and the old words stayed findable."""
    deps = written

    def committed_then_unsent(table, writes, job, **kwargs):
        table.transact(writes)
        raise Retryable("the queue is unreachable", code="queue_unavailable")

    monkeypatch.setattr(deps.queue, "commit", committed_then_unsent)
    memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id="wifi", text="Ask the landlord.")
    assert _found(deps, "hunter2zebra") == [] and _found(deps, "landlord") == ["wifi"]


def test_an_edit_leaves_no_copy_in_a_dreams_actions_and_a_profile_proposed_before_it_is_not_applied(service, written):
    """Trial B (session 38): a proposal dream's pending merge and profile quoted the words an edit then took out
    (they stayed in table.db), and applying the profile answered 200 and wrote them back as the live profile."""
    from pathlib import Path

    from memlane.domain.errors import Conflict
    from memlane.domain.models import DreamActionKind, DreamMode
    from memlane.services import dream

    deps = written
    explicit.write(deps, "demo", scope=SCOPE, memories=[
        {"text": "Ann lives in Quillerton.", "memory_id": "home"},
        {"text": "Ann lives in Quillerton!", "memory_id": "home2"},
        {"text": "Ann loves quillberry pie.", "memory_id": "pie", "memory_type": "preference"}])
    proposed = dream.start(deps, "demo", scope={"app_id": "app", "tenant_id": "ann"}, mode=DreamMode.PROPOSAL,
                           sync=True)
    actions = dream.list_actions(deps, "demo", proposed.task_id)[0]
    assert {a.kind for a in actions} >= {DreamActionKind.MERGE, DreamActionKind.EMIT_PROFILE}
    for mid, text in (("home", "Ann lives in a city."), ("home2", "Ann lives in a town."), ("pie", "Ann loves food.")):
        memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id=mid, text=text)
    service.drain()
    for action in actions:
        with pytest.raises(Conflict):
            dream.apply_action(deps, "demo", action.action_id)
        assert "quill" not in dream.get_action(deps, "demo", action.action_id).model_dump_json().lower()
    data_dir = Path(deps.table.path).parent
    assert [p.name for p in sorted(data_dir.rglob("*")) if p.is_file() and b"uillerton" in p.read_bytes()] == []


def test_an_edit_that_sends_the_same_text_back_leaves_pending_actions_pending(service, written):
    """A regression trial: a client that sends the whole memory back on each edit failed every pending proposal."""
    from memlane.domain.models import DreamActionStatus, DreamMode
    from memlane.services import dream

    deps = written
    explicit.write(deps, "demo", scope=SCOPE, memories=[{"text": "Ann lives in Quillerton.", "memory_id": "home"},
                                                        {"text": "Ann lives in Quillerton!", "memory_id": "home2"}])
    proposed = dream.start(deps, "demo", scope={"app_id": "app", "tenant_id": "ann"}, mode=DreamMode.PROPOSAL,
                           sync=True)
    pending = [a.action_id for a in dream.list_actions(deps, "demo", proposed.task_id)[0]]
    assert pending
    memories.update(deps, "demo", app_id="app", tenant_id="ann", memory_id="home", text="Ann lives in Quillerton.",
                    importance=0.9)
    assert {dream.get_action(deps, "demo", a).status for a in pending} == {DreamActionStatus.PENDING}
