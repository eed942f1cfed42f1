"""Issue 12 item 6: search over record types. Messages are index documents from the moment they are
added (not when extracted), a search names the record types it wants (memories by default) and
whether it stays in one thread or reaches the tenant's other threads as their access policies allow."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import pytest

from memlane.domain.errors import DependencyFailed, InvalidInput
from memlane.domain.models import AccessPolicy, Memory, RecordType, TaskStatus
from memlane.ports import Index, IndexQuery, IndexResult
from memlane.services import ingest, memories, scopes, search, stores, sweep

BASE = {"app_id": "app", "tenant_id": "u1"}
THREAD_1 = {**BASE, "agent_id": "bot", "run_id": "t1"}
THREAD_2 = {**BASE, "agent_id": "bot", "run_id": "t2"}
ALL = ["memory", "message", "summary"]


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def say(deps, store, scope, *contents: str, **kwargs: Any):
    return ingest.add(deps, store, scope=scope, messages=[{"role": "user", "name": "Ann", "content": c}
                                                         for c in contents], **kwargs)


def kinds(hits) -> list[tuple[str, str]]:
    return [(str(h.record_type), h.memory.text) for h in hits]


def test_a_message_is_searchable_as_soon_as_it_is_added(deps, store):
    task = say(deps, store, THREAD_1, "My locker combination is 4417, do not forget it.")
    assert task.status == TaskStatus.PENDING  # not extracted: no worker ran
    [hit] = search.search(deps, store, query="locker combination", scope=THREAD_1, record_types=["message"])
    assert hit.record_type == RecordType.MESSAGE
    assert hit.memory.memory_id == task.message_ids[0]
    assert hit.memory.text == "My locker combination is 4417, do not forget it."
    assert hit.memory.scope.run_id == "t1" and hit.memory.evidence == task.message_ids
    assert hit.message is not None and hit.message.role == "user" and hit.message.name == "Ann"


def test_search_finds_memories_only_unless_asked(service, deps, store):
    say(deps, store, THREAD_1, "I adopted a beagle named Max last Saturday.")
    service.drain()
    default = search.search(deps, store, query="beagle Max", scope=BASE)
    assert default and {h.record_type for h in default} == {RecordType.MEMORY}
    mixed = search.search(deps, store, query="beagle Max", scope=BASE, record_types=["memory", "message"])
    assert {h.record_type for h in mixed} == {RecordType.MEMORY, RecordType.MESSAGE}
    listed, _ = memories.list_(deps, store, scope=BASE, limit=100, cursor=None)
    assert listed and all(m.record_type == RecordType.MEMORY for m in listed)  # listing memories lists no message


def test_include_evidence_of_a_message_is_the_message(deps, store):
    say(deps, store, THREAD_1, "The wifi password is pelican-42.")
    [hit] = search.search(deps, store, query="wifi password", scope=THREAD_1, record_types=["message"],
                          include_evidence=True)
    assert [m.content for m in hit.evidence] == ["The wifi password is pelican-42."]


@pytest.mark.parametrize("record_types", [["fact"], ["memory", "nope"], [], ["message"] * 4])
def test_unknown_or_empty_record_types_are_refused(deps, store, record_types):
    with pytest.raises(InvalidInput) as e:
        search.search(deps, store, query="x", scope=BASE, record_types=record_types)
    assert e.value.code == "invalid_record_types" and e.value.field == "record_types"


def test_exact_thread_match_stays_in_the_thread(deps, store):
    say(deps, store, THREAD_1, "We booked the flight to Oslo for March.")
    say(deps, store, THREAD_2, "The flight to Lima got cancelled.")
    only = search.search(deps, store, query="flight", scope=THREAD_1, record_types=ALL, exact_thread_match=True)
    assert [t for _, t in kinds(only)] == ["We booked the flight to Oslo for March."]
    wide = search.search(deps, store, query="flight", scope=THREAD_1, record_types=ALL, exact_thread_match=False)
    assert {h.memory.scope.run_id for h in wide} == {"t1", "t2"}


@pytest.mark.parametrize("exact", [True, False])
def test_exact_thread_match_needs_one_thread(deps, store, exact):
    """Either way the search is made from one thread (`false` widens from it, as its access policy allows):
    before, `false` without one thread was searched as if the flag were left out."""
    for scope in (BASE, {**BASE, "run_id": ["t1", "t2"]}, {**BASE, "run_id": "*"}):
        with pytest.raises(InvalidInput) as e:
            search.search(deps, store, query="x", scope=scope, exact_thread_match=exact)
        assert e.value.code == "thread_required"


def test_other_threads_are_reached_only_if_the_asking_threads_policy_recalls(deps, store):
    say(deps, store, THREAD_2, "The flight to Lima got cancelled.")
    say(deps, store, THREAD_1, "Hello there.", access_policy=AccessPolicy.STORE_ONLY)
    assert search.search(deps, store, query="flight Lima", scope=THREAD_1, record_types=ALL,
                         exact_thread_match=False) == []
    scopes.set_access_policy(deps, store, scope=THREAD_1, policy=AccessPolicy.RECALL_AND_STORE)
    wide = search.search(deps, store, query="flight Lima", scope=THREAD_1, record_types=ALL, exact_thread_match=False)
    assert wide[0].memory.scope.run_id == "t2" and "Lima" in wide[0].memory.text


def test_exact_thread_match_false_keeps_the_agent_filter(deps, store):
    say(deps, store, {**THREAD_2, "agent_id": "other-bot"}, "The flight to Lima got cancelled.")
    say(deps, store, THREAD_1, "Hello there.")
    narrow = search.search(deps, store, query="flight Lima", scope=THREAD_1, record_types=["message"],
                           exact_thread_match=False)
    assert [h.memory.text for h in narrow] == ["Hello there."]  # the agent's own threads only
    wide = search.search(deps, store, query="flight Lima", scope={**THREAD_1, "agent_id": "*"},
                         record_types=["message"], exact_thread_match=False)
    assert wide[0].memory.scope.agent_id == "other-bot" and len(wide) == 2


def test_another_tenants_messages_are_never_found(deps, store):
    say(deps, store, {**THREAD_1, "tenant_id": "u2"}, "Bob's secret is the blue door.")
    assert search.search(deps, store, query="secret blue door", scope={**BASE, "run_id": "*"},
                         record_types=ALL) == []


# -- nothing accepted is lost: the index write of an add may fail after the table write -------------


class FailingIndex:
    """The index of the moment the add's index write failed (an outage): every upsert raises."""

    def __init__(self, index: Index):
        self.inner = index

    def upsert(self, store: str, docs: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        raise DependencyFailed("the index is down", code="index_failed")

    def search(self, store: str, query: IndexQuery) -> IndexResult:
        return self.inner.search(store, query)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_messages_an_add_could_not_index_are_indexed_by_its_job(service, deps, store):
    task = say(dataclasses.replace(deps, index=FailingIndex(deps.index)), store, THREAD_1,
               "My locker combination is 4417.")
    assert task.status == TaskStatus.PENDING  # accepted all the same: the message is in the table
    assert search.search(deps, store, query="locker combination", scope=THREAD_1, record_types=["message"]) == []
    service.drain()
    [hit] = search.search(deps, store, query="locker combination", scope=THREAD_1, record_types=["message"])
    assert hit.memory.memory_id == task.message_ids[0]


class CountingEmbedder:
    """The service's embedder, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []

    def embed(self, texts):
        self.texts += list(texts)
        return self.inner.embed(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_job_does_not_embed_the_messages_its_add_indexed_again(service, deps, store):
    counting = CountingEmbedder(deps.embedder)
    service.deps = counted = dataclasses.replace(deps, embedder=counting)
    task = ingest.add(counted, store, scope=THREAD_1, messages=[{"role": "assistant", "content": "Okay, noted."}])
    assert counting.texts == ["Okay, noted."]  # indexed by the add
    service.drain()
    assert deps.repo.find_task(store, "app", "u1", task.request_id).status == TaskStatus.SUCCEEDED
    assert counting.texts.count("Okay, noted.") == 1  # not embedded a second time by the job


@pytest.mark.parametrize("policy", [AccessPolicy.RECALL_ONLY, AccessPolicy.NONE])
def test_messages_of_an_add_without_extraction_are_indexed_by_the_sweeper(deps, store, policy):
    task = say(dataclasses.replace(deps, index=FailingIndex(deps.index)), store, THREAD_1,
               "My locker combination is 4417.", access_policy=policy)
    assert task.status == TaskStatus.SUCCEEDED and not task.extract
    report = sweep.sweep(deps)
    assert report.closed == 1
    found = deps.index.search(store, IndexQuery(scope=scopes.ScopeFilter(app_id="app", tenant_id="u1"),
                                                text="locker combination", record_types=(RecordType.MESSAGE,)))
    assert [h.memory_id for h in found.keyword] == task.message_ids
    assert sweep.sweep(deps).closed == 0  # closed for good once indexed


# -- over HTTP: the search route ----------------------------------------------------------------------


@pytest.fixture()
def call(deps):
    import json

    from memlane.api.app import build_app
    from memlane.server import _LambdaContext, http_event

    app = build_app(deps)

    def send(body):
        raw = json.dumps(body).encode()
        result = app.resolve(http_event("POST", "/v1/stores/demo/search", {"content-type": "application/json"}, raw,
                                        "127.0.0.1"), _LambdaContext())
        return result["statusCode"], json.loads(result["body"])

    return send


def test_search_route_answers_each_result_with_its_record_type(deps, store, call):
    task = say(deps, store, THREAD_1, "My locker combination is 4417.")
    status, body = call({"query": "locker combination", "scope": THREAD_1, "record_types": ["message"],
                         "exact_thread_match": True})
    assert status == 200, body
    [result] = body["results"]
    assert result["record_type"] == "message" and result["memory_id"] == task.message_ids[0]
    assert (result["role"], result["name"], result["memory_type"]) == ("user", "Ann", None)
    status, body = call({"query": "locker combination", "scope": THREAD_1})
    assert status == 200 and body["results"] == []  # memories only by default, and none was extracted yet


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"record_types": ["memory", "fact"]}, "invalid_input", "record_types.1"),
    ({"record_types": []}, "invalid_input", "record_types"),
    ({"record_types": "message"}, "invalid_input", "record_types"),
    ({"exact_thread_match": "yes"}, "invalid_input", "exact_thread_match"),
    ({"exact_thread_match": True, "scope": BASE}, "thread_required", "scope.run_id"),
])
def test_search_route_refuses_bad_record_types_and_thread_flags(store, call, body, code, field):
    status, answer = call({"query": "x", "scope": THREAD_1, **body})
    assert status == 400 and answer["error"]["code"] == code and answer["error"]["field"] == field


def test_cli_searches_the_record_types_it_is_given(service, deps, store, capsys, monkeypatch):
    import json

    from memlane import cli

    class Transport(cli.InProcessTransport):  # over this test's service (one process owns a data dir)
        def __init__(self, data_dir):
            from memlane.api.app import build_api

            self.service, self.app = service, build_api(deps)

    monkeypatch.setattr(cli, "InProcessTransport", Transport)
    local = ["--local"]
    assert cli.main([*local, "add", "demo", "--app", "app", "--tenant", "u1", "--run", "t1",
                     "--text", "My locker combination is 4417."]) == 0
    capsys.readouterr()
    assert cli.main([*local, "--json", "search", "demo", "--app", "app", "--tenant", "u1", "--run", "t1",
                     "--type", "message", "--exact-thread", "locker combination"]) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]  # the API's document
    assert result["record_type"] == "message" and result["text"] == "My locker combination is 4417."
    assert cli.main([*local, "search", "demo", "--app", "app", "--tenant", "u1", "--run", "t2",
                     "--type", "message", "--other-threads", "locker combination"]) == 0
    assert "[message] document: My locker combination is 4417." in capsys.readouterr().out


@pytest.mark.parametrize("policy", [AccessPolicy.NONE, AccessPolicy.RECALL_ONLY])
def test_a_thread_that_stores_nothing_keeps_its_turns_to_itself(deps, store, policy):
    """Found by a search made in it only; not from another thread, nor tenant-wide — and however much it says
    about the query, it hides no other thread's turns (they are left out by the index, not after ranking)."""
    say(deps, store, THREAD_2, *(f"Peanut allergy note {i}: peanut allergy, peanut allergy." for i in range(40)),
        access_policy=policy)
    say(deps, store, THREAD_1, "Remember my peanut allergy when you order lunch.")
    for scope, exact in ((BASE, None), (THREAD_1, False)):
        hits = search.search(deps, store, query="peanut allergy", scope=scope, top_k=5, record_types=["message"],
                             exact_thread_match=exact)
        assert [h.memory.scope.run_id for h in hits] == ["t1"]
    own = search.search(deps, store, query="peanut allergy", scope=THREAD_2, top_k=5, record_types=["message"])
    assert {h.memory.scope.run_id for h in own} == ({"t2"} if policy.recalls else set())  # `none` recalls nothing


@pytest.mark.parametrize("run", ["t1", None], ids=["same-thread-id", "default-thread"])
def test_another_agents_thread_of_the_same_id_is_not_kept_apart(deps, store, run):
    """What is kept apart is that agent's thread: another agent's thread of the same id (or its default thread)
    that stores is recalled as ever."""
    private, public = ({**BASE, "agent_id": agent, **({"run_id": run} if run else {})} for agent in ("bot", "helper"))
    say(deps, store, private, "My secret peanut allergy note.", access_policy=AccessPolicy.NONE)
    say(deps, store, public, "Remember my peanut allergy when you order lunch.")
    hits = search.search(deps, store, query="peanut allergy", scope=BASE, top_k=5, record_types=["message"])
    assert [h.memory.scope.agent_id for h in hits] == ["helper"]


def test_more_private_threads_than_the_index_returns_hide_no_other_turn(deps, store, monkeypatch):
    """Past the rounds that leave out the private threads found among the hits, every one of the tenant's is left
    out (from its registry): however many there are, the other threads' turns are found."""
    for i in range(250):
        say(deps, store, {**BASE, "agent_id": "bot", "run_id": f"p{i}"}, "peanut allergy peanut allergy peanut allergy",
            access_policy=AccessPolicy.RECALL_ONLY)
    say(deps, store, THREAD_1, "Remember my peanut allergy when you order lunch today please.")
    asked = []
    index_search = deps.index.search
    monkeypatch.setattr(deps.index, "search", lambda *a, **k: asked.append(a[1]) or index_search(*a, **k))
    hits = search.search(deps, store, query="peanut allergy", scope=BASE, top_k=5, record_types=["message"],
                         recipe="keyword")
    assert [h.memory.scope.run_id for h in hits] == ["t1"]
    assert len(asked) == 1 + search._PRIVATE_ROUNDS + 1 and len(asked[-1].messages_apart) == 250


@pytest.mark.parametrize("policy", [AccessPolicy.NONE, AccessPolicy.RECALL_ONLY])
def test_a_thread_switched_to_store_nothing_keeps_its_summary_to_itself_too(service, deps, store, policy):
    """A trial's finding: a thread summarised while it stored, then switched to `none` or `recall_only`, kept its
    turns to itself but not its summary — which quotes them — found tenant-wide and from a sibling thread."""
    from memlane.domain.scope import Scope
    from memlane.services import summaries

    stores.update(deps, store, summary_keep_recent=1)
    say(deps, store, THREAD_2, "My bank PIN hint is the zebra sticker on the fridge.",
        "I live on Plutozq Street, flat 4, next to the old mill.", "Remember the zebra hint for the PIN.")
    service.drain()
    assert summaries.refresh(deps, store, Scope(**THREAD_2), force=True) is not None
    say(deps, store, THREAD_1, "Remember my peanut allergy when you order lunch.")
    asked = dict(query="zebra PIN hint Plutozq", top_k=10, record_types=["summary", "message"])
    assert any(h.record_type == RecordType.SUMMARY for h in search.search(deps, store, scope=BASE, **asked))
    scopes.set_access_policy(deps, store, scope=THREAD_2, policy=policy)
    for scope, exact in ((BASE, None), (THREAD_1, False)):
        hits = search.search(deps, store, scope=scope, exact_thread_match=exact, **asked)
        assert [h for h in hits if h.memory.scope.run_id == "t2"] == []
    own = search.search(deps, store, scope=THREAD_2, **asked)
    assert {h.record_type for h in own} == ({RecordType.SUMMARY, RecordType.MESSAGE} if policy.recalls else set())


def test_an_add_replayed_after_its_first_attempt_died_before_indexing_is_searchable_at_once(deps, store):
    """A working-memory trial: the server killed after an add committed and before it indexed its messages; the
    client's retry (same request id and body) answered 202 with the messages not findable until the job ran (20 of 104
    such retries under kill -9)."""
    from memlane.faults import Faults

    class Died(Exception):
        pass

    def die(name):
        raise Died(name)

    deps.faults = Faults("add.after_messages_and_task@1", crash=die)
    with pytest.raises(Died):
        say(deps, store, THREAD_1, "The gate code is 7731.", request_id="add-1", sync=False)
    deps.faults = Faults()
    assert search.search(deps, store, query="gate code", scope=THREAD_1, record_types=["message"]) == []
    again = say(deps, store, THREAD_1, "The gate code is 7731.", request_id="add-1", sync=False)
    assert again.status == TaskStatus.PENDING
    [hit] = search.search(deps, store, query="gate code", scope=THREAD_1, record_types=["message"])
    assert hit.memory.memory_id == again.message_ids[0]
    assert deps.repo.locate_task(store, "add-1").messages_indexed  # its job does not embed them again
