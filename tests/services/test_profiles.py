"""Actor profiles: what a caller states of a tenant or an agent, merged with what the dream distils —
explicit wins, both shown with their origin, rendered as one stable text."""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain import limits
from memlane.domain.errors import InvalidInput, NotFound, PayloadTooLarge
from memlane.domain.models import DreamActionKind, DreamMode
from memlane.services import dream, erase, ingest, profiles, stores

APP, TENANT = "app", "ann"
T0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)


@pytest.fixture()
def store(deps):
    deps.settings = replace(deps.settings, consolidate_on_write=False)
    return stores.create(deps, name="demo").name


def distil(deps, store):
    for run, day, text in (("r1", 0, "I live in Boston."), ("r2", 9, "I moved from Boston to Denver."),
                           ("r3", 10, "I love hiking in the mountains.")):
        ingest.add(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": run},
                   sync=True, messages=[{"role": "user", "name": "Ann", "content": text,
                                         "created_at": T0 + timedelta(days=day)}])
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, sync=True,
                kinds=[DreamActionKind.EMIT_PROFILE], mode=DreamMode.SAFE_AUTO)


def test_nothing_known_is_none_and_a_404(deps, store):
    assert profiles.tenant_profile(deps, store, APP, TENANT) is None
    assert profiles.agent_profile(deps, store, APP, TENANT, "bot") is None
    with pytest.raises(NotFound) as e:
        profiles.get(deps, store, app_id=APP, tenant_id=TENANT)
    assert e.value.code == "profile_not_found"


def test_explicit_only(deps, store):
    put = profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann is a premium customer.",
                       attributes={"language": "Portuguese", "home_airport": "LIS"})
    assert put == profiles.tenant_profile(deps, store, APP, TENANT)
    assert [(f.name, f.value, f.origin) for f in put.attributes] == [
        ("home_airport", "LIS", "explicit"), ("language", "Portuguese", "explicit")]
    assert put.text == "Ann is a premium customer.\n- home_airport: LIS\n- language: Portuguese"


def test_merged_with_the_distilled_profile_explicit_wins(deps, store):
    distil(deps, store)
    distilled = profiles.tenant_profile(deps, store, APP, TENANT)
    assert {(f.name, f.value, f.origin) for f in distilled.attributes} >= {("lives in", "Denver", "distilled")}
    assert distilled.explicit_text == "" and "- lives in: Denver" in distilled.text

    merged = profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann travels for work.",
                          attributes={"lives_in": "Lisbon"})
    residence = [f for f in merged.attributes if f.name == "lives_in"]
    assert [(f.value, f.origin) for f in residence] == [("Lisbon", "explicit")]
    assert [(f.name, f.value, f.origin) for f in merged.overridden] == [("lives in", "Denver", "distilled")]
    assert ("likes", "hiking", "distilled") in {(f.name, f.value, f.origin) for f in merged.preferences}
    assert merged.text.startswith("Ann travels for work.\n- lives_in: Lisbon")
    assert "Denver" not in merged.text
    # the same state renders the same text
    assert profiles.tenant_profile(deps, store, APP, TENANT).text == merged.text
    # a later dream does not touch what the caller stated
    distil(deps, store)
    assert "- lives_in: Lisbon" in profiles.tenant_profile(deps, store, APP, TENANT).text


def test_put_replaces_the_explicit_profile(deps, store):
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="first", attributes={"a": "1"})
    second = profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="second", attributes={})
    assert second.text == "second" and second.attributes == []


def test_agent_profile_is_per_tenant(deps, store):
    role = "You are Ann's travel planner. Always confirm dates before booking."
    mine = profiles.put(deps, store, app_id=APP, tenant_id=TENANT, agent_id="planner", text=role,
                        attributes={"tone": "brief"})
    assert mine.agent_id == "planner" and mine.text.startswith(role)
    assert profiles.agent_profile(deps, store, APP, TENANT, "planner") == mine
    assert profiles.agent_profile(deps, store, APP, "bob", "planner") is None  # another tenant's agent
    assert profiles.tenant_profile(deps, store, APP, TENANT) is None  # the agent's is not the tenant's


def test_bad_input_is_refused_and_nothing_written(deps, store):
    cases = [({"text": "x" * (limits.MAX_PROFILE_TEXT_CHARS + 1)}, PayloadTooLarge, "text"),
             ({"attributes": {"bad  key": "v"}}, InvalidInput, "attributes"),
             ({"attributes": {"bad:key": "v"}}, InvalidInput, "attributes"),
             ({"attributes": {"k": "v" * (limits.MAX_PROFILE_VALUE_CHARS + 1)}}, PayloadTooLarge, "attributes.k"),
             ({"attributes": {f"k{i}": "v" for i in range(limits.MAX_PROFILE_ATTRIBUTES + 1)}}, PayloadTooLarge,
              "attributes"),
             ({"text": "  ", "attributes": {}}, InvalidInput, "text"),
             # one name three ways (names match whatever their case and separators): which value would hold?
             ({"attributes": {"lives_in": "Oslo", "Lives In": "Bergen", "lives-in": "Paris"}}, InvalidInput,
              "attributes.Lives In")]
    for body, error, field in cases:
        with pytest.raises(error) as e:
            profiles.put(deps, store, app_id=APP, tenant_id=TENANT, **body)
        assert e.value.field == field, body
    assert profiles.tenant_profile(deps, store, APP, TENANT) is None


def test_erased_with_the_tenant(deps, store):
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann is a premium customer.")
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, agent_id="planner", text="Plan trips.")
    done = erase.run_erasure(deps, erase.request_erasure(deps, app_id=APP, tenant_id=TENANT,
                                                         principal="ops").erasure_id)
    assert done.deleted["demo"]["profiles"] == 2
    assert profiles.tenant_profile(deps, store, APP, TENANT) is None
    assert profiles.agent_profile(deps, store, APP, TENANT, "planner") is None


def _said(deps, store, run, day, text):
    return ingest.add(deps, store, scope={"app_id": APP, "tenant_id": TENANT, "agent_id": "bot", "run_id": run},
                      sync=True, messages=[{"role": "user", "name": "Ann", "content": text,
                                            "created_at": T0 + timedelta(days=day)}])


def _facts(deps, store):
    found = profiles.tenant_profile(deps, store, APP, TENANT)
    return {(e.name, e.value) for e in found.attributes} if found else set()


def test_a_distilled_profile_follows_a_change_and_an_edit_without_a_dream(deps):
    """A trial's finding: a fact written at write time ("moved from Quito to Lima"), or an edit of the memory a
    profile rests on, left the profile — and every card — saying the old value until the next (hourly) dream."""
    from memlane.services import memories

    store = stores.create(deps, name="live").name  # write-time consolidation on, as served
    lives = _said(deps, store, "r1", 0, "I live in Quito.")
    _said(deps, store, "r2", 1, "I work as a glassblower.")
    dream.start(deps, store, scope={"app_id": APP, "tenant_id": TENANT}, sync=True,
                kinds=[DreamActionKind.EMIT_PROFILE], mode=DreamMode.SAFE_AUTO)
    assert {v for n, v in _facts(deps, store)} >= {"Quito", "glassblower"}

    (moved,) = _said(deps, store, "r3", 30, "I moved from Quito to Lima.").outcomes
    assert moved.action == "UPDATE" and moved.target_id == lives.outcomes[0].memory_id
    assert not any("Quito" in v for _, v in _facts(deps, store))

    job = next(m for m in deps.repo.iter_memories(store, APP, TENANT) if "glassblower" in m.text)
    memories.update(deps, store, app_id=APP, tenant_id=TENANT, memory_id=job.memory_id, text="Ann works as a potter.")
    values = " ".join(v for _, v in _facts(deps, store))
    assert "glassblower" not in values and "potter" in values


def test_delete_withdraws_what_was_stated_and_keeps_what_was_distilled(deps, store):
    """A trial: a stated diagnosis could not be withdrawn (a PUT without text and attributes is 400, and there was
    no DELETE) short of erasing the whole tenant."""
    distil(deps, store)
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann was diagnosed with asthma.",
                 attributes={"lives_in": "Lisbon"})
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, agent_id="planner", text="Plan trips by train.")

    assert profiles.delete(deps, store, app_id=APP, tenant_id=TENANT) is None
    left = profiles.get(deps, store, app_id=APP, tenant_id=TENANT)
    assert left.explicit_text == "" and "asthma" not in left.text
    assert {f.origin for f in [*left.attributes, *left.preferences]} == {"distilled"}
    assert ("lives in", "Denver") in {(f.name, f.value) for f in left.attributes}  # the distilled value shows again
    # the agent's is not the tenant's: it stays
    assert profiles.agent_profile(deps, store, APP, TENANT, "planner").text == "Plan trips by train."

    profiles.delete(deps, store, app_id=APP, tenant_id=TENANT, agent_id="planner")
    assert profiles.agent_profile(deps, store, APP, TENANT, "planner") is None
    with pytest.raises(NotFound) as e:
        profiles.get(deps, store, app_id=APP, tenant_id=TENANT, agent_id="planner")
    assert e.value.code == "profile_not_found"
    # stated again after a delete: a new profile
    assert profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann flies for work.").explicit_text \
        == "Ann flies for work."


def test_delete_of_nothing_stated_is_a_404_and_ids_are_checked(deps, store):
    with pytest.raises(NotFound) as e:
        profiles.delete(deps, store, app_id=APP, tenant_id=TENANT)
    assert e.value.code == "profile_not_found"
    distil(deps, store)  # a distilled profile only: nothing stated to delete, and it stays
    for agent in (None, "bot"):
        with pytest.raises(NotFound) as e:
            profiles.delete(deps, store, app_id=APP, tenant_id=TENANT, agent_id=agent)
        assert e.value.code == "profile_not_found"
    assert profiles.tenant_profile(deps, store, APP, TENANT) is not None
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann is a premium customer.")
    for ids, field in (({"app_id": "", "tenant_id": TENANT}, "app_id"), ({"app_id": APP, "tenant_id": "a/b"},
                                                                        "tenant_id"),
                       ({"app_id": APP, "tenant_id": TENANT, "agent_id": "*"}, "agent_id")):
        with pytest.raises(InvalidInput) as e:
            profiles.delete(deps, store, **ids)
        assert e.value.field == field
    with pytest.raises(NotFound) as e:
        profiles.delete(deps, "nostore", app_id=APP, tenant_id=TENANT)
    assert e.value.code == "store_not_found"
    assert profiles.tenant_profile(deps, store, APP, TENANT).explicit_text == "Ann is a premium customer."


def _files_holding(data_dir, word):
    return [str(p.relative_to(data_dir)) for p in sorted(data_dir.rglob("*"))
            if p.is_file() and word.encode() in p.read_bytes()]


def test_deleted_and_replaced_words_leave_the_local_files(deps, store):
    """A trial: a profile's PUT that replaced a text left the old text in the SQLite files' write-ahead logs while
    the server ran (a deletion compacts the files; a PUT did not)."""
    from pathlib import Path

    data_dir = Path(deps.table.path).parent
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann was diagnosed with Zqxreplaced4417.",
                 attributes={"condition": "Zqxattr4417"})
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, agent_id="nurse", text="Remind Ann of Zqxagent4417.")
    assert _files_holding(data_dir, "Zqxreplaced4417") and _files_holding(data_dir, "Zqxagent4417")

    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann is a premium customer.",
                 attributes={"tier": "gold"})
    assert _files_holding(data_dir, "Zqxreplaced4417") == [] and _files_holding(data_dir, "Zqxattr4417") == []
    profiles.delete(deps, store, app_id=APP, tenant_id=TENANT, agent_id="nurse")
    assert _files_holding(data_dir, "Zqxagent4417") == []
    profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann's code is Zqxdeleted4417.")
    assert _files_holding(data_dir, "Zqxdeleted4417")
    profiles.delete(deps, store, app_id=APP, tenant_id=TENANT)
    assert _files_holding(data_dir, "Zqxdeleted4417") == []


def test_tenants_stating_and_withdrawing_at_once_each_keep_only_their_own(deps, store):
    """Concurrent PUTs and DELETEs of several tenants' profiles (the local server serves them on several threads): each
    tenant ends with exactly what it last stated, or nothing, and never another tenant's words."""
    import threading

    tenants = [f"t{i}" for i in range(4)]
    failed: list[BaseException] = []

    def churn(tenant: str) -> None:
        try:
            for round_ in range(15):
                profiles.put(deps, store, app_id="app", tenant_id=tenant, text=f"{tenant} stated round {round_}.")
                if round_ % 3 == 2:
                    profiles.delete(deps, store, app_id="app", tenant_id=tenant)
            profiles.put(deps, store, app_id="app", tenant_id=tenant, text=f"{tenant} stated last.")
        except BaseException as error:  # noqa: BLE001 — reported below
            failed.append(error)

    threads = [threading.Thread(target=churn, args=(t,)) for t in tenants]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    for tenant in tenants:
        stated = deps.repo.get_explicit_profile(store, "app", tenant)
        assert stated is not None and stated.text == f"{tenant} stated last."


def test_a_put_a_delete_overtook_answers_what_it_stated(deps, store, monkeypatch):
    """A working-memory trial: a PUT racing a DELETE of the same profile answered 500 (37 of 60 rounds) — it read the
    profile again after writing it, and the DELETE had come between. It answers what it wrote; the DELETE stands."""
    repo_class = type(deps.repo)
    written = repo_class.put_explicit_profile

    def then_deleted(self, profile, **kw):
        written(self, profile, **kw)
        self.delete_explicit_profile(self.get_explicit_profile(store, APP, TENANT, None))

    monkeypatch.setattr(repo_class, "put_explicit_profile", then_deleted)
    put = profiles.put(deps, store, app_id=APP, tenant_id=TENANT, text="Ann prefers mornings.")
    assert put.text == "Ann prefers mornings."
    assert profiles.tenant_profile(deps, store, APP, TENANT) is None
