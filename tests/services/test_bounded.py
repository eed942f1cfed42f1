"""Issue 16: synchronous work is bounded by a deadline, and a sync add or dream that outlives it
degrades to asynchronous work that still ends SUCCEEDED or FAILED.

The slow model is a fake that sleeps past a tiny deadline; the tests assert on states, never on times.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from memlane.api.app import build_api
from memlane.domain.errors import DeadlineExceeded
from memlane.domain.models import TaskStatus
from memlane.extractors.llm import LLMExtractor
from memlane.prompts import dream as dream_prompt
from memlane.prompts import extract as extract_prompt
from memlane.server import _LambdaContext, http_event
from memlane.services import dream, ingest

SCOPE = {"app_id": "app", "tenant_id": "u1", "agent_id": "bot", "run_id": "r1"}
TEXT = "My sister Clara lives in Lisbon and teaches piano."
TINY = 0.05  # seconds: the deadline every slow call sleeps past


class SlowLLM:
    """A model that answers correctly, after `delay` seconds on each of its first `slow` calls."""

    name = "slow"

    def __init__(self, delay: float, slow: int = 1):
        self.delay, self.slow, self.calls = delay, slow, 0

    def generate(self, *, system, prompt, response_model):
        self.calls += 1
        if self.calls <= self.slow:
            time.sleep(self.delay)
        return self.answer(response_model)

    @staticmethod
    def answer(response_model):
        if response_model is extract_prompt.ExtractionResult:
            return response_model.model_validate({"memories": [{"text": "Ann's sister Clara lives in Lisbon.",
                                                                 "evidence": [0]}]})
        if response_model is dream_prompt.DreamResult:
            return response_model.model_validate({"actions": []})
        return response_model.model_validate({"profile": {"subject": "Ann"}})  # dream's ProfileResult


class BoundedSlowLLM(SlowLLM):
    """A model adapter that takes a request's budget (ports.Budgeted), as the Bedrock one does: under a
    deadline a call slower than what is left ends with DeadlineExceeded when the budget runs out. Without
    one (a job) it fails every call when `down`."""

    def __init__(self, delay: float, down: bool = False, deadline=None):
        super().__init__(delay)
        self.down, self.deadline = down, deadline

    def within(self, deadline):
        return BoundedSlowLLM(self.delay, self.down, deadline)

    def generate(self, *, system, prompt, response_model):
        if self.deadline is None:
            if self.down:
                raise RuntimeError("the model is down")
            return self.answer(response_model)
        budget = self.deadline.remaining()
        time.sleep(min(self.delay, budget))
        if self.delay > budget:
            raise DeadlineExceeded("the model call outlived the request's deadline")
        return self.answer(response_model)


@pytest.fixture()
def svc(svc):
    svc.queue.base_delay = 0.0
    return svc


def deadline(svc, seconds: float) -> None:
    svc.deps.settings = dataclasses.replace(svc.deps.settings, sync_deadline_seconds=seconds, sync_margin_seconds=0.0)


def slow_model(svc, llm: SlowLLM) -> None:
    svc.deps.llm = llm
    svc.deps.extractor = LLMExtractor(llm)


def call(api, method, path, body=None):
    raw = json.dumps(body).encode() if body is not None else b""
    result = api.resolve(http_event(method, path, {"content-type": "application/json"}, raw, "127.0.0.1"),
                         _LambdaContext())
    return result["statusCode"], json.loads(result["body"])


# -- a sync add past its deadline ----------------------------------------------------------------


def test_a_sync_add_past_its_deadline_answers_202_and_its_job_ends_it_succeeded(svc):
    deadline(svc, TINY)
    slow_model(svc, SlowLLM(delay=4 * TINY))
    api = build_api(svc.deps)

    status, body = call(api, "POST", "/v1/stores/demo/memories",
                        {"scope": SCOPE, "text": TEXT, "sync": True, "request_id": "slow-1"})

    assert (status, body) == (202, {"request_id": "slow-1", "status": "RUNNING"})
    assert svc.queue.depth() == 1  # its job was queued before the inline run began
    svc.drain()
    task = svc.deps.repo.locate_task("demo", "slow-1")
    assert task.status == TaskStatus.SUCCEEDED and len(task.memory_ids) == 1
    status, body = call(api, "GET", "/v1/stores/demo/tasks/slow-1?app_id=app&tenant_id=u1")
    assert (status, body["status"]) == (200, "SUCCEEDED")


def test_a_sync_add_past_its_deadline_whose_job_keeps_failing_ends_failed(svc):
    deadline(svc, TINY)
    slow_model(svc, BoundedSlowLLM(delay=60.0, down=True))  # it would take a minute: the budget cuts it
    api = build_api(svc.deps)

    status, body = call(api, "POST", "/v1/stores/demo/memories",
                        {"scope": SCOPE, "text": TEXT, "sync": True, "request_id": "slow-2"})

    assert (status, body["status"]) == (202, "RUNNING")
    svc.drain()
    task = svc.deps.repo.locate_task("demo", "slow-2")
    assert task.status == TaskStatus.FAILED and "the model is down" in task.error


def test_a_sync_add_within_its_deadline_still_answers_200_with_its_memories(svc):
    deadline(svc, 60.0)
    slow_model(svc, SlowLLM(delay=0.0))
    api = build_api(svc.deps)

    status, body = call(api, "POST", "/v1/stores/demo/memories", {"scope": SCOPE, "text": TEXT, "sync": True})

    assert status == 200 and body["status"] == "SUCCEEDED" and len(body["memories"]) == 1
    assert svc.queue.depth() == 0  # the safety-net job is discarded


def test_the_deadline_is_checked_between_steps_of_the_service(svc):
    """Without the API: the service takes the deadline and stops before its next step."""
    from memlane.domain.deadline import Deadline

    slow_model(svc, SlowLLM(delay=4 * TINY))
    task = ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT, sync=True, request_id="slow-3",
                      deadline=Deadline.after(TINY))
    assert task.status == TaskStatus.RUNNING and task.memory_ids == []
    svc.drain()
    assert svc.deps.repo.locate_task("demo", "slow-3").status == TaskStatus.SUCCEEDED


# -- a sync dream past its deadline ---------------------------------------------------------------


def test_a_sync_dream_past_its_deadline_answers_202_and_its_job_ends_it(svc):
    ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    svc.drain()
    deadline(svc, TINY)
    slow_model(svc, SlowLLM(delay=4 * TINY))
    api = build_api(svc.deps)

    status, body = call(api, "POST", "/v1/stores/demo/dream",
                        {"scope": {"app_id": "app", "tenant_id": "u1"}, "sync": True})

    assert (status, body["status"]) == (202, "RUNNING")
    svc.drain()
    done = dream.get_task(svc.deps, "demo", body["task_id"])
    assert done.status == TaskStatus.SUCCEEDED


def test_a_sync_dream_within_its_deadline_answers_200_and_leaves_no_job(svc):
    ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    svc.drain()
    api = build_api(svc.deps)

    status, body = call(api, "POST", "/v1/stores/demo/dream",
                        {"scope": {"app_id": "app", "tenant_id": "u1"}, "sync": True})

    assert (status, body["status"]) == (200, "SUCCEEDED")
    assert svc.queue.depth() == 0


# -- the other synchronous paths: search and context cards -----------------------------------------


class SlowEmbedder:
    """The store's embedder, slowed by `delay` seconds a call; under a deadline (ports.Budgeted) a call
    slower than what is left ends with DeadlineExceeded when the budget runs out."""

    def __init__(self, real, delay: float, deadline=None):
        self.real, self.delay, self.deadline = real, delay, deadline
        self.name, self.dim = real.name, real.dim

    def within(self, deadline):
        return SlowEmbedder(self.real, self.delay, deadline)

    def embed(self, texts):
        budget = self.delay if self.deadline is None else self.deadline.remaining()
        time.sleep(min(self.delay, budget))
        if self.delay > budget:
            raise DeadlineExceeded("the embedding call outlived the request's deadline")
        return self.real.embed(texts)


@pytest.mark.parametrize("path,body", [
    ("/v1/stores/demo/search", {"query": "where does Clara live?", "scope": {"app_id": "app", "tenant_id": "u1"}}),
    ("/v1/stores/demo/threads/r1/context", {"app_id": "app", "tenant_id": "u1", "agent_id": "bot",
                                            "query": "where does Clara live?"}),
])
def test_a_search_past_its_deadline_answers_503_deadline_exceeded(svc, path, body):
    ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    svc.drain()
    deadline(svc, TINY)
    svc.deps.embedder = SlowEmbedder(svc.deps.embedder, delay=2.0)  # would take two seconds a call
    api = build_api(svc.deps)

    status, answer = call(api, "POST", path, body)

    assert (status, answer["error"]["code"]) == (503, "deadline_exceeded")


def test_a_sync_dream_cut_short_by_anything_is_finished_by_its_job(svc):
    """A sync dream used to have no job: killed mid-run (a Lambda timeout, a crash, an error the service
    does not own), its task stayed RUNNING for ever. Its job is queued before it runs now."""
    ingest.add(svc.deps, "demo", scope=SCOPE, text=TEXT)
    svc.drain()
    slow_model(svc, CrashingOnceLLM())

    with pytest.raises(RuntimeError):
        dream.start(svc.deps, "demo", scope={"app_id": "app", "tenant_id": "u1"}, sync=True)

    [task], _ = dream.list_tasks(svc.deps, "demo", app_id="app", tenant_id="u1", limit=10, cursor=None)
    assert task.status == TaskStatus.RUNNING
    svc.queue.take_ownership()  # as after a restart: the job is due now
    svc.drain()
    assert dream.get_task(svc.deps, "demo", task.task_id).status == TaskStatus.SUCCEEDED


class CrashingOnceLLM(SlowLLM):
    def __init__(self):
        super().__init__(delay=0.0)

    def generate(self, *, system, prompt, response_model):
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the process died here")
        return self.answer(response_model)
