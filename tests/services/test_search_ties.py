"""Equal scores are ordered by meaning, not by memory id.

Reciprocal rank fusion ties whenever one memory tops the keyword list and another the vector list;
min-max normalisation then gives both the top fused score, and the heuristic reranker often ties them
again (hidden keywords put every query word in a turn's chatter too). Memory ids are random, so an
id tie-break made the first result a coin toss between runs (`memlane bench updates`: the current
fact first in one run, the chatter of the old conversation in the next). The one closer in meaning
to the query goes first.
"""

import dataclasses
from datetime import datetime, timezone

from memlane.domain.models import Memory
from memlane.domain.scope import Scope
from memlane.ports import Hit, IndexResult
from memlane.services import stores
from memlane.services.search import search

T0 = datetime(2025, 1, 10, tzinfo=timezone.utc)
SCOPE = Scope(app_id="app", tenant_id="u1", agent_id="a", run_id="r")


class TwoListsIndex:
    """One memory tops the keyword list, the other the vector list: their fused scores tie."""

    def __init__(self, keyword_top: str, vector_top: str):
        self.result = IndexResult(keyword=[Hit(keyword_top, 7.0)], vector=[Hit(vector_top, 0.62)])

    def search(self, store, query):
        return self.result

    def similarities(self, store, scope, vector, ids):
        return {mid: 0.1 for mid in ids}  # below the vector hit's: the keyword top is the farther in meaning


class FlatReranker:
    def rerank(self, query, texts):
        return [1.0 for _ in texts]


def memory(mid, text):
    return Memory(memory_id=mid, scope=SCOPE, text=text, created_at=T0, updated_at=T0, observed_at=T0)


def test_tied_scores_put_the_memory_closer_in_meaning_first(deps):
    store = stores.create(deps, name="demo").name
    chatter, fact = memory("aaaa", "User: Anyway, that's where things stand."), memory("zzzz", "User takes insulin.")
    for m in (chatter, fact):
        deps.repo.put_memory(store, m)
    for keyword_top, vector_top in ((chatter, fact), (fact, chatter)):
        tied = dataclasses.replace(deps, index=TwoListsIndex(keyword_top.memory_id, vector_top.memory_id),
                                   reranker=FlatReranker())
        hits = search(tied, store, query="What medication does the user take?", scope={"app_id": "app", "tenant_id": "u1"})
        assert hits[0].score == hits[1].score  # a tie indeed
        assert hits[0].memory.memory_id == vector_top.memory_id  # the closer one, whatever its id
