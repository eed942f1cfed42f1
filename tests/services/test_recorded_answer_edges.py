"""A trial (session 37): the recorded answer across tenants (one request id in two tenants) and at its size limit
(limits.MAX_RECORDED_ANSWER_BYTES) on DynamoDB (moto), beside the largest plain-text add."""

from __future__ import annotations

import pytest

from memlane.domain import limits
from memlane.domain.models import Candidate, TaskStatus
from memlane.services import consolidate, extract, ingest, memories, stores
from memlane.services.task_ids import statement_key
from tests.services.test_extract_concurrent_deliveries import X, Y
from tests.services.test_extract_retries import APP, Counted, Crash, Scripted, arm, table_mems


@pytest.fixture()
def demo(deps):
    stores.create(deps, name="demo")
    return deps


def crashed_add(deps, tenant, text):
    scope = {"app_id": APP, "tenant_id": tenant, "agent_id": "a", "run_id": "r1"}
    task = ingest.add(deps, "demo", scope=scope, sync=False, request_id="req-1",
                      messages=[{"role": "user", "content": text}])
    arm(deps, "extract.after_table_write@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", "req-1", app_id=APP, tenant_id=tenant)
    arm(deps, "")
    return task


def test_a_delete_in_one_tenant_redacts_only_its_own_recorded_answer(demo):
    """Holds: two tenants use request id req-1 with the same statements, both jobs crashed after recording; u1
    deletes X. u1's answer loses X (and its retry does not write it); u2's answer, task and memories are untouched, and
    its retry writes both."""
    deps = demo
    deps.extractor = Counted([X, Y])
    crashed_add(deps, "u1", "Clara is in Lisbon; cello on Sundays.")
    crashed_add(deps, "u2", "Clara is in Lisbon; cello on Sundays.")
    before = deps.repo.task_item("demo", APP, "u2", "req-1")
    x1 = next(m for m in table_mems(deps, tenant="u1").values() if m.text == X)
    memories.delete(deps, "demo", app_id=APP, tenant_id="u1", memory_id=x1.memory_id)
    assert deps.repo.task_item("demo", APP, "u2", "req-1") == before
    assert "clara" not in repr(deps.repo.task_item("demo", APP, "u1", "req-1")).lower()
    for tenant, expected in (("u1", [Y]), ("u2", [X, Y])):
        done = extract.run(deps, "demo", "req-1", app_id=APP, tenant_id=tenant)
        assert done.status == TaskStatus.SUCCEEDED and done.answer is None, done.error
        assert sorted(m.text for m in table_mems(deps, tenant=tenant).values()) == sorted(expected)
    assert deps.extractor.calls == 2  # once per tenant: each retry decided on its own tenant's answer


class Big(Scripted):
    """An answer of `n` statements whose recorded size is exactly `size` bytes (4-byte characters)."""

    def __init__(self, n, size):
        super().__init__([])
        self.n, self.size = n, size

    def extract(self, messages, **kw):
        ev = [m.message_id for m in messages]

        def cand(i, chars):
            return Candidate(text=f"{i:03d}" + "\U0001F600" * chars, evidence=ev)

        cands = [cand(i, 1000) for i in range(self.n)]
        used = sum(len(statement_key(c.text)) + len(c.model_dump_json().encode()) for c in cands)
        per = (self.size - used) // (4 * self.n)
        cands = [cand(i, 1000 + per) for i in range(self.n)]
        used = sum(len(statement_key(c.text)) + len(c.model_dump_json().encode()) for c in cands)
        rest = self.size - used  # < 4 * n: into the last one's prefix, as ASCII
        cands[-1] = cands[-1].model_copy(update={"text": "x" * rest + cands[-1].text})
        assert sum(len(statement_key(c.text)) + len(c.model_dump_json().encode()) for c in cands) == self.size
        return cands


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-limit", "one-byte-over"])
def test_an_answer_at_the_size_limit_is_recorded_beside_the_largest_plain_text_add_on_dynamodb(dynamo, over):
    """Holds: an answer of exactly MAX_RECORDED_ANSWER_BYTES (4-byte characters) is recorded in the task item beside
    a plain-text add of MAX_CONTENT_CHARS 4-byte characters — under DynamoDB's 400 KB — and its retry decides on it; one
    byte more is not recorded and the retry asks the model again."""
    deps = dynamo
    deps.extractor = Big(4, limits.MAX_RECORDED_ANSWER_BYTES + over)
    calls = []
    original = deps.extractor.extract
    deps.extractor.extract = lambda messages, **kw: calls.append(1) or original(messages, **kw)
    scope = {"app_id": APP, "tenant_id": "u1", "agent_id": "a", "run_id": "r1"}
    ingest.add(deps, "demo", scope=scope, sync=False, request_id="req-1",
               text="\U0001F600" * limits.MAX_CONTENT_CHARS)
    arm(deps, "extract.after_table_write@1")
    with pytest.raises(Crash):
        extract.run(deps, "demo", "req-1")
    arm(deps, "")
    running = deps.repo.locate_task("demo", "req-1")
    assert (running.answer is not None) == (not over)
    said = original(deps.repo.get_messages("demo", running.scope, running.message_ids))
    assert consolidate._recordable({statement_key(c.text): c for c in said}) == (not over)
    done = extract.run(deps, "demo", "req-1")
    assert done.status == TaskStatus.SUCCEEDED, done.error
    assert len(calls) == 1 + over
    held = table_mems(deps)  # (near-identical statements: some NOOP against the others)
    assert held and set(held) == {o.memory_id for o in done.outcomes if o.action.value != "NOOP"}
    assert len(done.outcomes) == 4
