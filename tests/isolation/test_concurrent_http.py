"""Concurrent tenants over real HTTP against `memlane serve`: no answer ever carries another tenant's
data or another request's id, a tenant key never reads the audit log, and every accepted message is
stored (issue 15, finding 1, end to end)."""

from __future__ import annotations

import threading

import pytest

from memlane.bootstrap import build
from memlane.client import ApiError, MemlaneClient
from memlane.config import Settings
from memlane.services import access

from ..e2e.conftest import Server

pytestmark = pytest.mark.e2e

TENANTS = ("alice", "bob", "carol", "dave")
THREADS_PER_TENANT = 2
ROUNDS = 20


@pytest.fixture()
def keyed_server(tmp_path):
    data = tmp_path / "data"
    deps = build(Settings.from_env(env={}, data_dir=data, embedder="hashing", reranker="none"))
    keys = {t: access.create_api_key(deps, f"{t}-app", {"travel": [t]}) for t in TENANTS}
    keys["admin"] = access.create_api_key(deps, "ops", {}, admin=True)
    server = Server(data).start()
    yield server, keys
    server.stop()


def test_concurrent_tenants_over_http_never_mix_and_lose_nothing(keyed_server):
    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("demo")
    for t in TENANTS:
        clients[t].add("demo", {"app_id": "travel", "tenant_id": t, "run_id": "seed"},
                       text=f"{t} keeps the secret word {t}word.", sync=True)

    problems: list[str] = []
    sent: dict[tuple[str, str], list[str]] = {}  # (tenant, run) → contents, in order
    accepted: dict[str, str] = {}  # request_id → tenant
    start = threading.Barrier(len(TENANTS) * THREADS_PER_TENANT + 2)
    done = threading.Event()

    def tenant_client(t: str, n: int) -> None:
        client, run = clients[t], f"run-{n}"
        scope = {"app_id": "travel", "tenant_id": t}
        contents = sent.setdefault((t, run), [])
        start.wait()
        for i in range(ROUNDS):
            rid, content = f"{t}-{n}-{i}", f"{t} note {n}.{i} about {t}word"
            try:
                got = client.add("demo", {**scope, "agent_id": "a", "run_id": run},
                                 messages=[{"role": "user", "content": content}], request_id=rid)
                if got["request_id"] != rid:
                    problems.append(f"{t} add {rid} answered with request_id {got['request_id']}")
                contents.append(content)
                accepted[rid] = t
                for hit in client.search("demo", f"secret word note {i}", scope, top_k=20):
                    if hit["scope"]["tenant_id"] != t or f"{t}word" not in hit["text"]:
                        problems.append(f"{t} search answered {hit['scope']['tenant_id']}: {hit['text']!r}")
            except ApiError as error:
                problems.append(f"{t} round {i}: {error}")

    def admin_reader() -> None:
        start.wait()
        while not done.is_set():
            try:
                clients["admin"]._call("GET", "/v1/stores/demo/requests?limit=20")
            except ApiError as error:
                problems.append(f"admin audit read: {error}")

    def audit_prober() -> None:
        start.wait()
        while not done.is_set():
            try:
                clients["alice"]._call("GET", "/v1/stores/demo/requests?limit=5")
                problems.append("a tenant key read the audit log")
            except ApiError as error:
                if error.status != 403:
                    problems.append(f"tenant audit probe: {error}")

    workers = [threading.Thread(target=tenant_client, args=(t, n)) for t in TENANTS
               for n in range(THREADS_PER_TENANT)]
    watchers = [threading.Thread(target=admin_reader), threading.Thread(target=audit_prober)]
    for thread in workers + watchers:
        thread.start()
    for thread in workers:
        thread.join()
    done.set()
    for thread in watchers:
        thread.join()
    assert problems == []

    # afterwards: every accepted add reached SUCCEEDED under its own tenant, and every message is there
    assert len(accepted) == len(TENANTS) * THREADS_PER_TENANT * ROUNDS
    for rid, t in accepted.items():
        task = clients[t].wait_task("demo", rid, timeout=120)
        assert task["status"] == "SUCCEEDED" and task["scope"]["tenant_id"] == t, task
    for (t, run), contents in sent.items():
        scope = {"app_id": "travel", "tenant_id": t, "agent_id": "a", "run_id": run}
        stored = [m["content"] for m in clients[t].messages("demo", scope, limit=200)["messages"]]
        assert stored == contents
    # and one tenant's key cannot read another's task: to it, the id does not exist
    with pytest.raises(ApiError) as refused:
        clients["bob"].get_task("demo", "alice-0-0")
    assert (refused.value.status, refused.value.code) == (404, "task_not_found")


def test_concurrent_batches_of_different_tenants_check_each_add_and_lose_nothing(keyed_server):
    """The batch route (POST .../memories:batch) under concurrent tenants: each add is checked against its
    sender's grant on its own (an add naming another tenant is refused in its own result, the rest go in),
    no result carries another request's id, and every accepted add ends SUCCEEDED under its own tenant."""
    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("batches")
    problems: list[str] = []
    accepted: dict[str, str] = {}
    start = threading.Barrier(len(TENANTS))

    def sender(t: str, victim: str) -> None:
        start.wait()
        for i in range(5):
            adds = [{"scope": {"app_id": "travel", "tenant_id": t, "run_id": f"b-{i}"}, "request_id": f"{t}-b{i}-{k}",
                     "messages": [{"role": "user", "content": f"{t} batch note {i}.{k} about {t}word"}]}
                    for k in range(3)]
            adds.append({"scope": {"app_id": "travel", "tenant_id": victim, "run_id": "x"},
                         "request_id": f"{t}-into-{victim}-{i}", "text": f"{t} writes into {victim}"})
            try:
                body = clients[t].sdk.request("POST", "/v1/stores/batches/memories:batch", json={"adds": adds})
            except ApiError as refused:
                problems.append(f"{t} batch {i}: {refused}")
                continue
            for add, result in zip(adds, body["results"]):
                if result["request_id"] != add["request_id"]:
                    problems.append(f"{t} got result {result['request_id']} for {add['request_id']}")
                elif add["scope"]["tenant_id"] == t:
                    if result["outcome"] != "accepted":
                        problems.append(f"{t} own add refused: {result}")
                    accepted[add["request_id"]] = t
                elif result["outcome"] != "refused" or result["error"]["code"] != "outside_grant":
                    problems.append(f"{t} wrote into {victim}: {result}")

    threads = [threading.Thread(target=sender, args=(t, TENANTS[(n + 1) % len(TENANTS)]))
               for n, t in enumerate(TENANTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert len(accepted) == len(TENANTS) * 5 * 3
    for rid, t in accepted.items():
        task = clients[t].wait_task("batches", rid, timeout=120)
        assert task["status"] == "SUCCEEDED" and task["scope"]["tenant_id"] == t, task
    for t in TENANTS:  # nothing of another tenant reached this one
        hits = clients[t].search("batches", "batch note writes into", {"app_id": "travel", "tenant_id": t}, top_k=50)
        assert hits and all(h["scope"]["tenant_id"] == t and f"{t}word" in h["text"] for h in hits)


def test_concurrent_tenants_sending_the_same_request_ids_each_keep_every_memory(keyed_server):
    """Request ids are each tenant's own: four tenants send the same ids at once, over HTTP, each from two
    threads. Every tenant's memories stay findable by it alone (the ids derived from a request carry the
    tenant; before, a later add of the same id took an earlier tenant's documents out of the index)."""
    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("shared-ids")
    problems: list[str] = []
    start = threading.Barrier(len(TENANTS) * THREADS_PER_TENANT)

    def sender(t: str, n: int) -> None:
        start.wait()
        for i in range(5):
            rid = f"req-{n}-{i}"  # the same ids in every tenant
            try:
                clients[t].add("shared-ids", {"app_id": "travel", "tenant_id": t, "run_id": f"r{n}"},
                               text=f"{t} stores parcel {n}x{i} with code {t}code.", request_id=rid, sync=True)
            except ApiError as error:
                problems.append(f"{t} {rid}: {error}")

    threads = [threading.Thread(target=sender, args=(t, n)) for t in TENANTS for n in range(THREADS_PER_TENANT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    for t in TENANTS:
        # with the history: a later parcel of the same tenant supersedes an earlier one (a knowledge update)
        hits = clients[t].search("shared-ids", f"parcel code {t}code", {"app_id": "travel", "tenant_id": t}, top_k=50,
                                 include_superseded=True)
        assert all(h["scope"]["tenant_id"] == t and f"{t}code" in h["text"] for h in hits)
        found = {h["text"].split("parcel ")[1].split(" ")[0] for h in hits if "parcel " in h["text"]}
        assert found == {f"{n}x{i}" for n in range(THREADS_PER_TENANT) for i in range(5)}, (t, sorted(found))


def test_concurrent_tenants_editing_and_deleting_their_memories_leave_nothing_deleted_or_stale(keyed_server):
    """Edits racing deletes, for four tenants at once over HTTP: a deleted memory stays deleted (404, not
    found by its words), a surviving one is found by its last edit's words only (the index holds what the
    table holds), and no answer carries another tenant's memory."""
    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("demo")
    count, edits = 8, 3
    for t in TENANTS:
        clients[t].write_memories("demo", {"app_id": "travel", "tenant_id": t},
                                  [{"memory_id": f"{t}-m{i}", "text": f"{t} memory {t}{i}edit0"} for i in range(count)])
    problems: list[str] = []
    start = threading.Barrier(len(TENANTS) * 2)

    def editor(t: str) -> None:
        start.wait()
        for k in range(1, edits + 1):
            for i in range(count):
                try:
                    got = clients[t]._call("PATCH", f"/v1/stores/demo/memories/{t}-m{i}",
                                           {"app_id": "travel", "tenant_id": t, "text": f"{t} memory {t}{i}edit{k}"})
                    if not got["text"].startswith(t):
                        problems.append(f"{t} edited into {got['text']!r}")
                except ApiError as e:
                    if e.status != 404:  # deleted meanwhile: the only refusal expected
                        problems.append(f"{t} edit {i}: {e.status} {e.code}")

    def deleter(t: str) -> None:
        start.wait()
        for i in range(0, count, 2):
            clients[t]._call("DELETE", f"/v1/stores/demo/memories/{t}-m{i}", query={"app_id": "travel", "tenant_id": t})

    threads = [threading.Thread(target=f, args=(t,)) for t in TENANTS for f in (editor, deleter)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert problems == []
    for t in TENANTS:
        client, scope = clients[t], {"app_id": "travel", "tenant_id": t}
        for i in range(count):
            ids = lambda word: [h["memory_id"] for h in client.search("demo", word, scope, recipe="keyword", top_k=20)]  # noqa: E731
            if i % 2 == 0:
                with pytest.raises(ApiError):
                    client._call("GET", f"/v1/stores/demo/memories/{t}-m{i}", query=scope)
                assert all(f"{t}-m{i}" not in ids(f"{t}{i}edit{k}") for k in range(edits + 1))
                continue
            text = client._call("GET", f"/v1/stores/demo/memories/{t}-m{i}", query=scope)["text"]
            assert text == f"{t} memory {t}{i}edit{edits}"
            assert ids(f"{t}{i}edit{edits}") == [f"{t}-m{i}"]
            assert all(f"{t}-m{i}" not in ids(f"{t}{i}edit{k}") for k in range(edits))  # no stale text indexed
    # The audit log names each record a tenant's request addressed under that tenant only, and no id of a refused one
    rows, cursor = [], None
    while True:
        page = clients["admin"]._call("GET", "/v1/stores/demo/requests", query={"limit": 100, **({"cursor": cursor}
                                                                                               if cursor else {})})
        rows += page["requests"]
        if not (cursor := page.get("next_cursor")):
            break
    for t in TENANTS:
        deleted = {r["target_id"] for r in rows if r["operation"] == "DELETE /v1/stores/{store}/memories/{id}"
                   and r["tenant_id"] == t and r["principal"] == f"{t}-app" and r["status"] == 200}
        assert deleted == {f"{t}-m{i}" for i in range(0, count, 2)}
    assert all(r["target_id"] is None for r in rows if r["status"] >= 400)
    assert all(r["target_id"] is None or r["target_id"].startswith(f"{r['tenant_id']}-") for r in rows)


def test_concurrent_tenants_deleting_by_encoded_ids_each_get_one_answered_audit_row(keyed_server):
    """This session's request handling under concurrent tenants: paths decoded per segment (ids with `:`, `+`, `@`
    sent percent-encoded), a change's audit row written before it runs and replaced by its answer's, a body naming
    a key twice refused — each tenant's deletes land on its own memories, and every change ends with one row, its
    own tenant's, none left at status 0."""
    import json
    import urllib.error
    import urllib.request
    from urllib.parse import quote

    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("demo")
    count = 6
    ids = {t: [f"{t}:m+{i}@x" for i in range(count)] for t in TENANTS}
    for t in TENANTS:
        clients[t].write_memories("demo", {"app_id": "travel", "tenant_id": t},
                                  [{"memory_id": mid, "text": f"{t} keeps {mid}"} for mid in ids[t]])
    problems: list[str] = []
    start = threading.Barrier(len(TENANTS))
    twice = '{"scope": {"app_id": "travel", "tenant_id": "%s"}, "text": "x", "scope": {}}'

    def tenant(t: str) -> None:
        client, scope = clients[t], {"app_id": "travel", "tenant_id": t}
        start.wait()
        for mid in ids[t]:
            got = client._call("DELETE", f"/v1/stores/demo/memories/{quote(mid, safe='')}", query=scope)
            if got["memory_id"] != mid:
                problems.append(f"{t} deleted {got['memory_id']!r} for {mid!r}")
            sent = urllib.request.Request(f"{server.url}/v1/stores/demo/memories", data=(twice % t).encode(),
                                          method="POST", headers={"content-type": "application/json",
                                                                  "authorization": f"Bearer {keys[t]}"})
            try:
                urllib.request.urlopen(sent, timeout=30)
                problems.append(f"{t}: a key named twice was accepted")
            except urllib.error.HTTPError as e:
                if json.loads(e.read())["error"]["code"] != "duplicate_key":
                    problems.append(f"{t}: {e.code}")

    _each_tenant_at_once(tenant)
    assert problems == []
    rows = clients["admin"]._call("GET", "/v1/stores/demo/requests", query={"limit": 200})["requests"]
    assert not [r for r in rows if r["status"] == 0]
    for t in TENANTS:
        with pytest.raises(ApiError):
            clients[t]._call("GET", f"/v1/stores/demo/memories/{quote(ids[t][0], safe='')}",
                             query={"app_id": "travel", "tenant_id": t})
        deleted = sorted(r["target_id"] for r in rows if r["operation"] == "DELETE /v1/stores/{store}/memories/{id}"
                         and r["tenant_id"] == t and r["principal"] == f"{t}-app" and r["status"] == 200)
        assert deleted == sorted(ids[t])


def test_concurrent_tenants_deleting_one_thread_id_without_an_agent_each_delete_their_own(keyed_server):
    """This session's request handling under concurrent tenants: a run deleted without naming its agent is the
    thread of the agent that claimed the id in the caller's tenant (404 once it is gone), and a message dated
    more than a day ahead is refused — four tenants using one thread id at once, each deletes its own thread only."""
    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("demo")
    for t in TENANTS:
        for agent in ("planner", "booker"):
            clients[t].add("demo", {"app_id": "travel", "tenant_id": t, "agent_id": agent, "run_id": f"t-{agent}"},
                           messages=[{"role": "user", "content": f"{t} plans a trip with {agent}"}])
    problems: list[str] = []
    start = threading.Barrier(len(TENANTS))

    def tenant(t: str) -> None:
        try:
            deletes(t)
        except Exception as e:  # noqa: BLE001 — a thread's error is a finding, not a silent exit
            problems.append(f"{t}: {e!r}")

    def deletes(t: str) -> None:
        client, scope = clients[t], {"app_id": "travel", "tenant_id": t}
        start.wait()
        try:
            client.add("demo", {**scope, "agent_id": "planner", "run_id": "t-planner"},
                       messages=[{"role": "user", "content": "later", "created_at": "2099-01-01T00:00:00Z"}])
            problems.append(f"{t}: a message dated 2099 was accepted")
        except ApiError as e:
            if e.status != 400:
                problems.append(f"{t}: {e.status} for a message dated 2099")
        try:
            deleted = client._call("DELETE", "/v1/stores/demo/runs/t-planner", query=scope)
        except ApiError as e:
            problems.append(f"{t}: {e.status} {e.code} for the delete without agent")
            return
        if deleted["messages"] != 1:
            problems.append(f"{t} deleted {deleted['messages']} messages of t-planner")
        try:
            client._call("DELETE", "/v1/stores/demo/runs/t-planner", query=scope)
            problems.append(f"{t}: a second delete without agent answered 200")
        except ApiError as e:
            if (e.status, e.code) != (404, "thread_not_found"):
                problems.append(f"{t}: {e.status} {e.code} for the second delete")

    _each_tenant_at_once(tenant)
    assert problems == []
    for t in TENANTS:  # each tenant's other thread is whole
        kept = clients[t]._call("GET", "/v1/stores/demo/threads/t-booker",
                                query={"app_id": "travel", "tenant_id": t})
        assert kept["message_count"] == 1 and kept["scope"]["agent_id"] == "booker"


def test_concurrent_tenants_building_cards_of_one_line_each_see_their_own_and_count_it_themselves(keyed_server):
    """The card's line counts are kept per thread (a timing channel when they were the process's): four tenants
    whose threads hold the same line build cards at once, each several times — each card holds its own tenant's
    turns only, and the same text every time."""
    server, keys = keyed_server
    clients = {name: MemlaneClient(server.url, api_key=key) for name, key in keys.items()}
    clients["admin"].create_store("demo")
    said = "My PIN for the clinic portal is 4417."
    for t in TENANTS:
        clients[t].add("demo", {"app_id": "travel", "tenant_id": t, "run_id": "same-line"},
                       messages=[{"role": "user", "content": said}, {"role": "user", "content": f"I am {t}."}])
    problems: list[str] = []
    start = threading.Barrier(len(TENANTS))

    def tenant(t: str) -> None:
        try:
            start.wait()
            texts = {clients[t]._call("POST", "/v1/stores/demo/threads/same-line/context",
                                      {"app_id": "travel", "tenant_id": t, "budget_tokens": 500})["text"]
                     for _ in range(5)}
            others = [o for o in TENANTS if o != t and f"I am {o}." in "".join(texts)]
            if len(texts) != 1 or others or f"I am {t}." not in texts.pop():
                problems.append(f"{t}: {len(texts)} texts, others' turns {others}")
        except Exception as e:  # noqa: BLE001 — a thread's error is a finding, not a silent exit
            problems.append(f"{t}: {e!r}")

    _each_tenant_at_once(tenant)
    assert problems == []


def _each_tenant_at_once(work) -> None:  # type: ignore[no-untyped-def]
    """`work(tenant)` for every tenant, each on a thread of its own, all joined."""
    threads = [threading.Thread(target=work, args=(t,)) for t in TENANTS]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
