"""Access policies per run (OCI semantics): recall_and_store, recall_only, store_only, none."""

import pytest

from memlane.domain.errors import Conflict
from memlane.domain.models import AccessPolicy, TaskStatus
from memlane.domain.scope import exact_scope
from memlane.services import ingest, scopes, search, stores, tasks

BASE = {"app_id": "app", "tenant_id": "ann", "agent_id": "bot"}


@pytest.fixture()
def store(deps):
    return stores.create(deps, name="demo").name


def tell(deps, store, run, text, policy=None):
    return ingest.add(deps, store, scope={**BASE, "run_id": run}, access_policy=policy,
                      messages=[{"role": "user", "content": text}])


def recall(deps, store, run, query):
    return [h.memory.text for h in search.search(deps, store, query=query, scope={**BASE, "run_id": run})]


def test_store_only_extracts_but_its_searches_recall_nothing(service, deps, store):
    tell(deps, store, "incognito", "I am allergic to shellfish.", policy="store_only")
    service.drain()
    assert recall(deps, store, "incognito", "allergies") == []
    assert any("shellfish" in t for t in recall(deps, store, "*", "allergies"))  # stored for the tenant
    assert recall(deps, store, ["incognito", "other"], "allergies") == []  # dropped from a list as well


def test_recall_only_keeps_messages_extracts_nothing_but_recalls(service, deps, store):
    tell(deps, store, "main", "I play the trumpet in a jazz band.")
    task = tell(deps, store, "guest", "I secretly hate jazz.", policy="recall_only")
    service.drain()
    assert tasks.get(deps, store, task.request_id).outcomes == []
    assert any("trumpet" in t for t in recall(deps, store, ["guest", "main"], "jazz"))
    assert not any("hate" in t for t in recall(deps, store, "*", "jazz"))


def test_none_stores_messages_only(service, deps, store):
    tell(deps, store, "main", "I live in Oslo.")
    tell(deps, store, "private", "My bank PIN is stored in my wallet.", policy="none")
    service.drain()
    assert recall(deps, store, "private", "Oslo") == []
    assert not any("PIN" in t for t in recall(deps, store, "*", "bank PIN"))


def test_policy_is_set_on_first_use_visible_and_changeable(service, deps, store):
    tell(deps, store, "r1", "I run marathons.", policy="recall_only")
    with pytest.raises(Conflict) as e:  # an existing run keeps its policy: naming another one is refused
        tell(deps, store, "r1", "I also swim every morning.", policy="recall_and_store")
    assert e.value.code == "access_policy_mismatch"
    tell(deps, store, "r1", "I also swim every morning.")
    service.drain()
    [info] = scopes.list_(deps, store, app_id="app", tenant_id="ann", limit=10, cursor=None)[0]
    assert info.access_policy == AccessPolicy.RECALL_ONLY and info.message_count == 2
    changed = scopes.set_access_policy(deps, store, scope={**BASE, "run_id": "r1"}, policy=AccessPolicy.STORE_ONLY)
    assert changed.access_policy == AccessPolicy.STORE_ONLY and changed.message_count == 2
    task = tell(deps, store, "r1", "I cycle to work.")
    service.drain()
    assert tasks.get(deps, store, task.request_id).outcomes  # store_only extracts
    assert recall(deps, store, "r1", "cycle") == []


def test_an_add_refused_for_its_policy_leaves_no_pointer_or_open_entry(service, deps, store):
    """The request-id pointer and the sweeper's entry are written before the run's policy is read: a refusal
    took neither back, so the id stayed claimed (another tenant's lookup by id alone then met two owners)."""
    tell(deps, store, "r1", "I run marathons.", policy="recall_only")
    with pytest.raises(Conflict):
        ingest.add(deps, store, scope={**BASE, "run_id": "r1"}, request_id="refused-1", access_policy="none",
                   messages=[{"role": "user", "content": "I also swim."}])
    assert deps.repo.task_owners(store, "refused-1") == []
    assert [e for e in deps.repo.open_tasks(store) if e.request_id == "refused-1"] == []


def test_an_add_refused_for_its_policy_leaves_a_concurrent_adds_pointer_alone(service, deps, store, monkeypatch):
    """Two adds of one request id: the refused one, deciding while the other was between its claim and its
    commit, took back the claim they share — the accepted add's task was then found by nobody's id alone."""
    from memlane.repository import Repository

    tell(deps, store, "r1", "I run marathons.", policy="recall_only")
    real, fired = Repository.claim_request, []

    def then_refused(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        if not fired:
            fired.append(True)
            with pytest.raises(Conflict):
                ingest.add(deps, store, scope={**BASE, "run_id": "r1"}, request_id="req-1", access_policy="none",
                           messages=[{"role": "user", "content": "I also swim."}])
        return out

    monkeypatch.setattr(Repository, "claim_request", then_refused)
    ingest.add(deps, store, scope={**BASE, "run_id": "r1"}, request_id="req-1",
               messages=[{"role": "user", "content": "I also swim."}])
    assert fired
    assert deps.repo.task_owners(store, "req-1") == [("app", "ann")]
    assert tasks.get(deps, store, "req-1").request_id == "req-1"  # found by its id alone


def test_a_threads_turns_stay_its_own_as_evidence_once_it_is_switched_to_store_nothing(service, deps, store):
    """An intra-tenant trial: a thread switched to recall_only after its memories were made — its turns were kept
    out of every other search's hits, but a tenant-wide search with `include_evidence` returned them whole as the
    memories' evidence. The memory stays (what it stored before the switch); its turns only for the thread itself."""
    tell(deps, store, "sw", "My locker code at the gym is 4471, I always forget it.")
    service.drain()
    scopes.set_access_policy(deps, store, scope={**BASE, "run_id": "sw"}, policy="recall_only")

    def evidence(run):
        hits = search.search(deps, store, query="gym locker code", scope={**BASE, "run_id": run}, include_evidence=True,
                             exact_thread_match=False if run == "other" else None)  # another thread recalling
        assert any("locker" in h.memory.text for h in hits), run  # the memory itself stays
        return [t.content for h in hits for t in h.evidence]

    assert evidence("*") == []  # tenant-wide
    assert evidence("other") == []
    assert any("4471" in said for said in evidence("sw"))  # the thread itself still reads its own turns


@pytest.mark.parametrize("policy", [AccessPolicy.NONE, AccessPolicy.RECALL_ONLY])
def test_a_thread_switched_to_store_nothing_extracts_none_of_its_queued_adds(service, deps, store, policy):
    """A regression trial: a retry accepted as the thread was switched to `none` (and so any add still queued when the
    switch was made) extracted memories into a thread that stores nothing. The job reads the policy when it runs."""
    scope = {**BASE, "run_id": "r9"}
    task = tell(deps, store, "r9", "My bank PIN is 4417, I keep it in my wallet.")
    scopes.set_access_policy(deps, store, scope=scope, policy=policy)
    service.drain()

    done = tasks.get(deps, store, task.request_id, app_id="app", tenant_id="ann")
    assert done.status == TaskStatus.SUCCEEDED and done.outcomes == []
    assert list(deps.repo.iter_memories(store, "app", "ann")) == []
    assert deps.repo.get_messages(store, exact_scope(scope), task.message_ids)  # the messages are kept
