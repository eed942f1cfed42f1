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


def _as_if_written_before(deps, store, memory_id, reading=""):
    """The memory as a version before these rules left it: its reading made by other rules (or none)."""
    m = deps.repo.get_memory(store, "app", "ann", memory_id)
    deps.repo.put_memory(store, m.model_copy(update={"reading": reading}), previous=m)
    return deps.repo.get_memory(store, "app", "ann", memory_id)


def test_readings_made_by_other_rules_are_counted_and_written_again_over_the_version_read(deps, store):
    """After an upgrade whose rules differ, every kept reading is sealed by other rules and read anew at each search:
    `memlane readings STORE --repair` writes them again, without moving `updated_at` (it is not an edit)."""
    from memlane.services.readings import readings

    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann lives in Denver.", "memory_id": "home"},
                                                       {"text": "Ann likes jazz.", "memory_id": "jazz"},
                                                       {"text": "Ann plays chess.", "memory_id": "chess"}])
    memories.delete(deps, store, app_id="app", tenant_id="ann", memory_id="chess")  # keeps no reading: not counted
    fresh = conflicts.reading("Ann lives in Denver.")
    old = _as_if_written_before(deps, store, "home", "0" * 16 + fresh[16:])  # another version's seal
    _as_if_written_before(deps, store, "jazz")  # none: written before readings existed
    assert not any(kept(deps, store).values())

    counted = readings(deps, store)
    assert (counted.tenants, counted.memories, counted.stale, counted.written) == (1, 2, 2, 0)
    assert not any(kept(deps, store).values())  # a count writes nothing

    lines: list[str] = []
    done = readings(deps, store, repair=True, progress=lines.append)
    assert (done.stale, done.written, done.changed_meanwhile) == (2, 2, 0)
    assert all(kept(deps, store).values())
    home = deps.repo.get_memory(store, "app", "ann", "home")
    assert home.reading == fresh and home.updated_at == old.updated_at and home.text == old.text
    assert "2 stale readings, 2 written again" in lines[-1]
    assert readings(deps, store).stale == 0


def test_a_memory_edited_while_its_reading_is_written_again_keeps_the_edits_reading(deps, store, monkeypatch):
    """The write holds only over the version read: an edit that lands between the read and the write wins, with the
    reading of its own text."""
    from memlane.services import readings as service

    explicit.write(deps, store, scope=SCOPE, memories=[{"text": "Ann lives in Denver.", "memory_id": "home"}])
    _as_if_written_before(deps, store, "home")
    made = conflicts.reading

    def edited_meanwhile(text):
        monkeypatch.setattr(conflicts, "reading", made)  # the edit below stamps its own reading
        memories.update(deps, store, app_id="app", tenant_id="ann", memory_id="home", text="Ann lives in Boulder.")
        return made(text)

    monkeypatch.setattr(conflicts, "reading", edited_meanwhile)
    report = service.readings(deps, store, repair=True)
    assert (report.stale, report.written, report.changed_meanwhile) == (1, 0, 1)
    home = deps.repo.get_memory(store, "app", "ann", "home")
    assert home.text == "Ann lives in Boulder." and home.reading == conflicts.reading("Ann lives in Boulder.")


def test_the_readings_command_exits_1_while_stale_readings_are_left(service, store, tmp_path, capsys):
    from memlane import cli

    explicit.write(service.deps, store, scope=SCOPE, memories=[{"text": "Ann lives in Denver.", "memory_id": "home"}])
    _as_if_written_before(service.deps, store, "home")
    data = ["--data-dir", str(tmp_path / "data")]  # the service fixture's
    assert cli.main([*data, "readings", store]) == 1
    assert "1 stale readings" in capsys.readouterr().out
    assert cli.main([*data, "--json", "readings", store, "--repair"]) == 0
    assert '"written": 1' in capsys.readouterr().out
    assert cli.main([*data, "readings", store]) == 0
    assert isinstance(conflicts.read(service.deps.repo.get_memory(store, "app", "ann", "home")), conflicts._Kept)
