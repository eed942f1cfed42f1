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
