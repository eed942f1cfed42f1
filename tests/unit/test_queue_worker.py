"""`memlane worker`'s consumer (memlane/worker.py) over SQS (moto): each job runs through services.jobs.deliver
as the extract Lambda runs it; the message is deleted when done, handed back when it failed or the worker
stops, kept hidden while it runs, and given up on (task FAILED, dead-letter queue) on its last delivery."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Iterator

import boto3
import pytest

from memlane import bootstrap, cli
from memlane.adapters.sqs.source import SqsJobSource
from memlane.config import Settings
from memlane.ports import Job
from memlane.services import jobs
from memlane.worker import QueueWorker
from tests.unit.test_worker import wait_for

REGION = "us-east-1"


@pytest.fixture()
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def make_queue(client: Any, name: str, *, dead_after: int | None = None) -> str:
    attributes = {}
    if dead_after is not None:
        dlq = client.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": str(dead_after)})
    return client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]


def send(client: Any, url: str, n: int) -> Job:
    job = Job.of_tenant("extract", "s", f"r{n}", "app", "t")
    client.send_message(QueueUrl=url, MessageBody=job.model_dump_json())
    return job


def waiting(client: Any, url: str) -> int:
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                                                      "ApproximateNumberOfMessagesNotVisible"])
    return sum(int(v) for v in attrs["Attributes"].values())


def run_until(w: Any, predicate: Callable[[], bool]) -> None:
    """Start the worker, wait for `predicate`, stop the worker whatever happened."""
    w.start()
    try:
        assert wait_for(predicate)
    finally:
        w.stop()


class Jobs:
    """What the worker ran (jobs.handle) and gave up (jobs.give_up), with a behaviour per request id."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.ran: list[str] = []
        self.given_up: list[tuple[str, str]] = []
        self.behave: dict[str, Callable[[int], None]] = {}
        self.lock = threading.Lock()
        monkeypatch.setattr(jobs, "handle", self.handle)
        monkeypatch.setattr(jobs, "give_up", lambda deps, job, reason: self.given_up.append((job.request_id, reason)))

    def handle(self, deps: Any, job: Job) -> None:
        with self.lock:
            self.ran.append(job.request_id)
            attempt = self.ran.count(job.request_id)
        self.behave.get(job.request_id, lambda n: None)(attempt)


def worker(client: Any, url: str, **options: Any) -> QueueWorker:
    options = {"threads": 2, "visibility": 30, "poll": 1, "max_attempts": 3, "grace": 5.0, "report_every": 0,
               "say": lambda line: None, **options}
    return QueueWorker(deps=None, source=SqsJobSource(url, client), **options)  # type: ignore[arg-type]


def test_each_job_runs_once_and_its_message_is_deleted(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)
    url = make_queue(sqs, "jobs", dead_after=3)
    sent = [send(sqs, url, n).request_id for n in range(6)]
    w = worker(sqs, url)
    run_until(w, lambda: w.counts.done == 6)
    assert sorted(ran.ran) == sorted(sent)
    assert waiting(sqs, url) == 0


def test_a_failed_job_is_delivered_again_and_finishes(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)

    def fail_first(attempt: int) -> None:
        if attempt == 1:
            raise RuntimeError("model unreachable")

    ran.behave["r0"] = fail_first
    url = make_queue(sqs, "retry", dead_after=3)
    send(sqs, url, 0)
    w = worker(sqs, url)
    run_until(w, lambda: w.counts.done == 1)
    assert ran.ran == ["r0", "r0"] and ran.given_up == [] and w.counts.retried == 1
    assert waiting(sqs, url) == 0


def test_a_job_failing_every_delivery_fails_its_task_then_goes_to_the_dead_letter_queue(
        sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)

    def always(attempt: int) -> None:
        raise RuntimeError(f"poison {attempt}")

    ran.behave["r0"] = always
    url = make_queue(sqs, "poison", dead_after=2)
    send(sqs, url, 0)
    w = worker(sqs, url, max_attempts=2)
    dlq = sqs.get_queue_url(QueueName="poison-dlq")["QueueUrl"]
    run_until(w, lambda: waiting(sqs, dlq) == 1)
    # delivery 1 is the last that works (max 2): its failure gives the task up with its own reason; delivery 2
    # runs nothing; SQS then moves the message on
    assert ran.ran == ["r0"]
    assert ran.given_up[0] == ("r0", "RuntimeError: poison 1")
    assert waiting(sqs, url) == 0


def test_without_a_dead_letter_queue_a_job_given_up_is_deleted(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)
    ran.behave["r0"] = lambda attempt: (_ for _ in ()).throw(RuntimeError("poison"))
    url = make_queue(sqs, "nodlq")
    send(sqs, url, 0)
    sqs.send_message(QueueUrl=url, MessageBody="{not a job")
    w = worker(sqs, url, max_attempts=1)
    run_until(w, lambda: w.counts.given_up == 2)
    assert waiting(sqs, url) == 0  # not delivered forever
    assert [rid for rid, _ in ran.given_up] == ["r0"]


def test_a_job_running_past_the_visibility_timeout_is_not_delivered_twice(
        sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)
    release = threading.Event()
    ran.behave["r0"] = lambda attempt: release.wait(30) and None
    url = make_queue(sqs, "slow", dead_after=3)
    send(sqs, url, 0)
    w = worker(sqs, url, visibility=2, threads=2)  # extended every second or so while it runs
    w.start()
    try:
        assert wait_for(lambda: ran.ran == ["r0"])
        time.sleep(5)  # well past the visibility timeout: the other thread polls all along
        assert ran.ran == ["r0"]
        release.set()
        assert wait_for(lambda: w.counts.done == 1)
    finally:
        release.set()
        w.stop()
    assert waiting(sqs, url) == 0


def test_stopping_hands_back_the_job_in_hand(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)
    release = threading.Event()
    ran.behave["r0"] = lambda attempt: release.wait(30) and None
    url = make_queue(sqs, "stop", dead_after=3)
    send(sqs, url, 0)
    w = worker(sqs, url, visibility=300)
    w.start()
    assert wait_for(lambda: ran.ran == ["r0"])
    w.stop(grace=0.2)  # the job does not finish in time: handed back, not held for 300 s
    try:
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, AttributeNames=["ApproximateReceiveCount"])
        assert [m["Attributes"]["ApproximateReceiveCount"] for m in got.get("Messages", [])] == ["2"]
        assert w.counts.handed_back == 1
    finally:
        release.set()
    time.sleep(0.2)
    assert w.counts.done == 0  # finishing after it was handed back deletes nothing: the next delivery owns it


def test_a_worker_needs_shared_engines(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("MEMLANE_QUEUE_URL", "MEMLANE_TABLE", "MEMLANE_OPENSEARCH_URL", "MEMLANE_MODE", "MEMLANE_INDEX"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(bootstrap.Misconfigured, match="MEMLANE_QUEUE_URL"):
        bootstrap.build_job_source(Settings(data_dir=tmp_path))
    assert cli.main(["--data-dir", str(tmp_path / "d"), "worker"]) == cli.EXIT_MISSING_EXTRA
    err = capsys.readouterr().err
    assert "MEMLANE_OPENSEARCH_URL" in err and "MEMLANE_TABLE=dynamodb" in err and "Traceback" not in err
    assert cli.main(["--data-dir", str(tmp_path / "d"), "serve", "--no-worker", "--port", "0"]) \
        == cli.EXIT_MISSING_EXTRA
    assert "--no-worker" in capsys.readouterr().err


def test_worker_threads_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["worker", "--threads", "0"]) == cli.EXIT_USAGE
    assert "1 to 64" in capsys.readouterr().err


def test_a_job_finishing_in_the_stop_grace_period_stays_hidden_from_other_workers(
        sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)
    release = threading.Event()
    ran.behave["r0"] = lambda attempt: release.wait(30) and None if attempt == 1 else None
    url = make_queue(sqs, "grace", dead_after=3)
    send(sqs, url, 0)
    stopping, other = worker(sqs, url, visibility=2, threads=1), worker(sqs, url, visibility=2, threads=1)
    stopping.start()
    try:
        assert wait_for(lambda: ran.ran == ["r0"])
        other.start()
        stopper = threading.Thread(target=stopping.stop, kwargs={"grace": 20})
        stopper.start()
        time.sleep(5)  # past the visibility timeout, within the grace period: still extended
        release.set()
        stopper.join(30)
        assert stopping.counts.done == 1
        assert ran.ran == ["r0"]  # the other worker never got it
    finally:
        release.set()
        other.stop()


def test_a_worker_without_the_aws_extra_names_it(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    code = ("import sys; sys.modules['boto3'] = sys.modules['botocore'] = None\n"  # as if the aws extra were missing
            "from memlane import cli\n"
            f"sys.exit(cli.main(['--data-dir', {str(tmp_path / 'data')!r}, 'worker']))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update(MEMLANE_TABLE="dynamodb", MEMLANE_OPENSEARCH_URL="http://127.0.0.1:9", MEMLANE_EMBEDDER="hashing",
               MEMLANE_QUEUE_URL="http://127.0.0.1:9/123456789012/jobs")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert done.returncode == cli.EXIT_MISSING_EXTRA, done.stderr
    assert "pip install 'memlane[aws]'" in done.stderr and "Traceback" not in done.stderr


class Flaky:
    """A job source whose receive raises what `fail` says while it says so (then works as `source`)."""

    def __init__(self, source: SqsJobSource):
        self.source, self.fail = source, None
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)

    def receive(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return self.source.receive(*args, **kwargs)


def test_a_consumer_outlives_an_error_the_queue_client_did_not_expect(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = Jobs(monkeypatch)
    url = make_queue(sqs, "odd", dead_after=3)
    source = Flaky(SqsJobSource(url, sqs))
    source.fail = KeyError("Messages")  # a client library's bug, not a MemlaneError
    w = QueueWorker(deps=None, source=source, threads=2, visibility=30, poll=1, max_attempts=3,  # type: ignore[arg-type]
                    grace=5.0, report_every=0, say=lambda line: None)
    w.start()
    try:
        assert wait_for(lambda: source.calls >= 2)
        source.fail = None
        sent = [send(sqs, url, n).request_id for n in range(3)]
        assert wait_for(lambda: w.counts.done == 3)  # both consumers survived and took jobs
    finally:
        w.stop()
    assert sorted(ran.ran) == sorted(sent) and w.counts.receive_errors >= 2


def test_the_health_endpoint_says_when_the_worker_cannot_reach_its_queue(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from memlane.domain.errors import DependencyFailed

    Jobs(monkeypatch)
    url = make_queue(sqs, "health", dead_after=3)
    source = Flaky(SqsJobSource(url, sqs))
    w = QueueWorker(deps=None, source=source, threads=2, visibility=30, poll=0, max_attempts=3,  # type: ignore[arg-type]
                    grace=5.0, report_every=0, say=lambda line: None)
    monkeypatch.setattr("memlane.worker.BACKOFF_CAP", 0.05)  # the test need not wait out a real back-off
    w.start()
    health = w.serve_health("127.0.0.1", 0)
    address = f"http://127.0.0.1:{health.server_address[1]}/health"
    seen: list[Any] = []

    def answers(status: int, path: str = "/health") -> bool:
        """Whether the probe answers `status` (its answer kept); a probe that does not answer in time is
        a miss, asked again: two consumers polling with no wait share the interpreter with it, and on a
        loaded machine one answer can take seconds."""
        try:
            seen.append(httpx.get(address.replace("/health", path), timeout=5))
        except httpx.TransportError:
            return False
        return seen[-1].status_code == status

    try:
        assert wait_for(lambda: answers(200))
        assert seen[-1].json()["status"] == "ok" and seen[-1].json()["threads"] == {"configured": 2, "alive": 2}
        source.fail = DependencyFailed("queue unreachable")
        assert wait_for(lambda: answers(503))
        down = seen[-1].json()
        assert down["status"] == "unavailable" and "queue unreachable" in down["reason"]
        source.fail = None
        assert wait_for(lambda: answers(200))
        assert wait_for(lambda: answers(404, "/other"))
    finally:
        health.shutdown()
        w.stop()
