"""Data an older version wrote, read by this one (an upgrade trial, session 34)."""

from memlane.domain.models import REDACTED, TaskOutcome
from memlane.services import ingest, stores, tasks

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "trip"}


def test_an_outcome_an_older_version_redacted_keeping_its_reason_shows_no_word_of_it(deps):
    """Versions before 2026-12-04 redacted a deleted thread's task outcomes by their text alone; the reason, which
    quotes the statement, stayed and was served by GET .../tasks after an upgrade."""
    store = stores.create(deps, name="demo").name
    task = ingest.add(deps, store, scope=SCOPE, sync=True,
                      messages=[{"role": "user", "content": "I live in Oslo."}])
    item = deps.repo.task_item(store, "app", "u1", task.request_id)
    item["outcomes"][0].update(text="", reason="same relation ('Secret plan ZQX trip Oslo'), another value")
    deps.table.put(item)  # as that version left it

    [outcome] = tasks.get(deps, store, task.request_id, app_id="app", tenant_id="u1").outcomes
    assert (outcome.text, outcome.reason) == ("", REDACTED)


def test_an_outcome_without_its_text_keeps_a_reason_that_quotes_nothing():
    said = TaskOutcome(action="NOOP", memory_id="m1", target_id="m1",
                       reason="said again here; the memory it repeated went with its thread")
    assert said.reason.startswith("said again here")


def test_a_memory_an_older_version_kept_with_a_time_past_the_calendar_in_utc_is_indexed_by_fsck(deps):
    """An older version kept a model's "9999-12-31T23:59:59-14:00" (this one drops it on write): indexing that row
    raised OverflowError, so `fsck --repair` stopped on it and left the store's drift unrepaired."""
    from datetime import datetime, timedelta, timezone

    from memlane.domain.models import Memory
    from memlane.domain.scope import Scope
    from memlane.services import fsck, search

    store = stores.create(deps, name="demo").name
    ingest.add(deps, store, scope=SCOPE, sync=True, messages=[{"role": "user", "content": "I live in Oslo."}])
    late = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14)))
    now = datetime.now(timezone.utc)
    deps.repo.put_memory(store, Memory(memory_id="m-late", scope=Scope(**SCOPE), text="Ann keeps a telescope.",
                                       created_at=now, updated_at=now, event_time=late), new=True)

    report = fsck.fsck(deps, store, repair=True)

    assert report.missing == 1 and report.repaired == 1
    assert fsck.fsck(deps, store).missing == 0
    hits = search.search(deps, store, query="telescope", scope={"app_id": "app", "tenant_id": "u1"}, top_k=5)
    assert [h.memory.memory_id for h in hits][0] == "m-late"
