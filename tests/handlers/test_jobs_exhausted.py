"""Issue 16: every job ends. A Lambda timeout kills the extract function without running `give_up`, so
the delivery after it must see the receive count: on the last one the queue allows (ExtractMaxReceives),
the job is given up on before any work, its task says FAILED with a reason, and the record fails so SQS
moves it to the dead-letter queue — for every job kind that can time out.

DynamoDB and SQS are moto; the models are the hashing embedder, no LLM (nothing here calls one).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from tests.handlers.conftest import Aws, parameter_default

SCOPE = {"app_id": "support", "tenant_id": "u-42", "agent_id": "helpdesk", "run_id": "r-1"}
LAST = parameter_default("ExtractMaxReceives")


@pytest.fixture()
def deps(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "none", "MEMLANE_RERANKER": "none"}.items():
        monkeypatch.setenv(name, value)
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import stores

    deps = bootstrap.build(Settings.from_env())
    stores.create(deps, name="demo")
    return deps


@pytest.fixture()
def extract(aws: Aws, deps: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return aws.load("extract")


def delivered(aws: Aws, receive: int) -> dict[str, Any]:
    """The one queued job as Lambda hands it over on its `receive`-th delivery."""
    [message] = aws.queued()
    message["Attributes"]["ApproximateReceiveCount"] = str(receive)
    return message


# Each kind: queue its job (returns a reader of its task's status and reason).


def _extract(deps: Any) -> Callable[[], tuple[str, str | None]]:
    from memlane.services import ingest

    task = ingest.add(deps, "demo", scope=SCOPE, text="I adopted a beagle named Max.")
    return lambda: _task(deps, task.request_id)


def _summary(deps: Any) -> Callable[[], tuple[str, str | None]]:
    from memlane.domain.scope import write_scope
    from memlane.services import summaries, threads

    scope = {k: v for k, v in SCOPE.items() if k != "run_id"}
    threads.create(deps, "demo", scope=scope, thread_id=SCOPE["run_id"])  # the thread the refresh is of
    tenant = deps.for_tenant("demo", SCOPE["app_id"], SCOPE["tenant_id"])
    task = summaries.request_refresh(tenant, "demo", write_scope(SCOPE))
    return lambda: _task(deps, task.request_id)


def _task(deps: Any, request_id: str) -> tuple[str, str | None]:
    task = deps.repo.locate_task("demo", request_id)
    return str(task.status), task.error


def _dream(deps: Any) -> Callable[[], tuple[str, str | None]]:
    from memlane.services import dream

    task = dream.start(deps, "demo", scope={"app_id": SCOPE["app_id"], "tenant_id": SCOPE["tenant_id"]})

    def read() -> tuple[str, str | None]:
        done = dream.get_task(dream.for_task(deps, "demo", task.task_id), "demo", task.task_id)
        return str(done.status), done.error
    return read


def _erase(deps: Any) -> Callable[[], tuple[str, str | None]]:
    from memlane.services import erase

    erasure = erase.request_erasure(deps, app_id=SCOPE["app_id"], tenant_id=SCOPE["tenant_id"], principal="ops")

    def read() -> tuple[str, str | None]:
        done = deps.repo.get_erasure(erasure.erasure_id)
        return str(done.status), done.error
    return read


def _purge(deps: Any) -> Callable[[], tuple[str, str | None]]:
    from memlane.services import stores

    stores.delete(deps, "demo")

    def read() -> tuple[str, str | None]:
        state = deps.repo.purge_state("demo")
        assert state is not None, "the purge's record is gone: it ran instead of giving up"
        return state["status"], state.get("error")
    return read


KINDS = {"extract": _extract, "summarize": _summary, "dream": _dream, "erase": _erase, "purge_store": _purge}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_job_on_its_last_receive_is_given_up_before_it_works(aws: Aws, deps: Any, extract, kind: str) -> None:
    status_of = KINDS[kind](deps)
    message = delivered(aws, LAST)  # every delivery before it timed out: no give_up ran
    assert json.loads(message["Body"])["kind"] == kind

    result = extract(aws.sqs_event([message]))

    assert result == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}  # on to the DLQ
    status, reason = status_of()
    assert status == "FAILED"
    assert reason is not None and f"{LAST} deliveries" in reason


def test_a_job_before_its_last_receive_still_runs(aws: Aws, deps: Any, extract) -> None:
    status_of = _extract(deps)

    result = extract(aws.sqs_event([delivered(aws, LAST - 1)]))

    assert result == {"batchItemFailures": []}
    assert status_of() == ("SUCCEEDED", None)


def test_an_extract_timed_out_on_every_delivery_is_failed_then_dead_lettered(aws: Aws, deps: Any, extract) -> None:
    """The DLQ contract of docs/deploy.md, on moto's redrive: the task says FAILED, with its reason,
    by the time SQS moves the message to the dead-letter queue."""
    status_of = _extract(deps)
    for receive in range(1, LAST):
        [message] = aws.queued()  # the function is killed by its timeout: the record comes back
        assert message["Attributes"]["ApproximateReceiveCount"] == str(receive)
        assert status_of()[0] == "PENDING"
    [message] = aws.queued()
    assert extract(aws.sqs_event([message]))["batchItemFailures"]  # the last delivery: given up

    assert aws.queued() == []  # past maxReceiveCount: moved
    [dead] = aws.queued(aws.dead_letter_url)
    assert dead["Body"] == message["Body"]
    status, reason = status_of()
    assert status == "FAILED" and "timed out" in reason
