"""Each memory keeps the reading search's newer-first ranking needs (policies/conflicts.py), made of its text when it
is written — by extraction, an explicit write, an edit of its text, a dream's rewrite — so a search reads a pair's
words only when the readings cannot tell the pair apart."""

import pytest

from memlane.domain.models import DreamActionKind
from memlane.policies import conflicts
from memlane.services import dream, explicit, ingest, memories, search, stores

SCOPE = {"app_id": "app", "tenant_id": "ann"}


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def kept(deps, store):
    """Each memory of the tenant: whether its reading is one made of its text by these rules."""
    return {m.memory_id: isinstance(conflicts.read(m), conflicts._Kept)
            for m in deps.repo.iter_memories(store, "app", "ann")}


def test_every_write_of_a_memory_keeps_a_reading_of_its_text(deps, store):
    ingest.add(deps, store, scope={**SCOPE, "run_id": "r1"}, sync=True,
               messages=[{"role": "user", "content": "I live in Boston and I work at Globex."}])
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann lives in Denver.", "memory_id": "home-1"},
                                                       {"text": "Ann lives in Denver.", "memory_id": "home-2"},
                                                       {"text": "Ann likes jazz.", "memory_id": "jazz"}])
    memories.update(deps, store, app_id="app", tenant_id="ann", memory_id="jazz", text="Ann likes bebop jazz.")
    task = dream.start(deps, store, scope=SCOPE, sync=True)
    actions = deps.repo.list_actions(store, "app", "ann", task.task_id)[0]
    assert any(a.kind == DreamActionKind.MERGE for a in actions)

    held = kept(deps, store)
    assert len(held) >= 4 and all(held.values()), held
    jazz = deps.repo.get_memory(store, "app", "ann", "jazz")
    assert jazz.reading == conflicts.reading("Ann likes bebop jazz.")  # the edit's text, read again


def test_a_search_over_kept_readings_ranks_the_newer_change_first(deps, store):
    """Two active memories that conflict (written as given, no consolidation): the newer first, read from the
    readings kept — the same order as reading the pair."""
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's apartment is in Brooklyn.", "memory_id": "old"}])
    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann's apartment is in Queens.", "memory_id": "new"}])
    assert all(kept(deps, store).values())
    hits = search.search(deps, store, query="Ann's apartment Brooklyn", scope=SCOPE, top_k=2)
    assert [h.memory.memory_id for h in hits] == ["new", "old"]
