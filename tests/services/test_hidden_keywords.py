"""Hidden keywords (indexed, never shown) say nothing the memory's own speaker did not say, unless the
store asks for the assistant's words too, and follow the memory's text when it is edited."""

from datetime import datetime, timezone

import pytest

from memlane.services import ingest, memories, search, stores

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
CONVERSATION = [
    {"role": "assistant", "content": "Your scan showed a tumour, so we should discuss chemotherapy soon.",
     "created_at": T0},
    {"role": "user", "name": "Ann", "content": "Okay.", "created_at": T0},
    {"role": "user", "name": "Ann", "content": "I start a new job on Monday.", "created_at": T0},
    {"role": "user", "name": "Ann", "content": "I used to bake at a small bakery downtown.", "created_at": T0},
]


def _job(deps, store):
    ingest.add(deps, store, scope=SCOPE, sync=True, messages=CONVERSATION)
    listed, _ = memories.list_(deps, store, scope=SCOPE, limit=50, cursor=None)
    return next(m for m in listed if "new job" in m.text)


def _keyword_hits(deps, store, word):
    return {h.memory.memory_id for h in search.search(deps, store, query=word, scope=SCOPE, top_k=20,
                                                      recipe="keyword")}


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="kw").name


def test_the_assistants_words_are_not_hidden_keywords_of_a_users_memory(deps, store):
    job = _job(deps, store)
    assert job.memory_id not in _keyword_hits(deps, store, "chemotherapy")
    assert job.memory_id in _keyword_hits(deps, store, "bakery")  # the same speaker's neighbouring turn


def test_a_store_can_ask_for_the_assistants_words(deps):
    stores.create(deps, name="kw-assistant", keywords_from_assistant=True)
    job = _job(deps, "kw-assistant")
    assert job.memory_id in _keyword_hits(deps, "kw-assistant", "chemotherapy")


def test_editing_the_text_drops_the_old_hidden_keywords(deps, store):
    job = _job(deps, store)
    edited = memories.update(deps, store, app_id="app", tenant_id="u1", memory_id=job.memory_id,
                             text="Ann starts a new job at the library on Monday.")
    assert job.memory_id not in _keyword_hits(deps, store, "bakery")
    assert job.memory_id in _keyword_hits(deps, store, "library")
    assert "Ann" in edited.keywords.split()  # the speaker and the date it was said stay findable
    assert "bakery" not in edited.keywords
