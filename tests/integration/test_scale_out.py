"""Issue 17 #4: several processes over the shared engines, no AWS. Two `memlane serve --no-worker` and two
`memlane worker` processes over moto's DynamoDB and SQS servers and the real OpenSearch, driven over real HTTP
by several threads of several tenants, against both servers in turn: adds (async, through the queue),
searches, memory deletes, a thread delete. Mid-load one worker is killed with SIGKILL while it holds jobs.

Then: every accepted add's task SUCCEEDED, once (one task per request id, one memory per add, none written
twice), the killed worker's jobs were delivered again and finished by the other, every add is searchable from
either server, no deleted memory is, no answer carries another tenant's data, and no process wrote a data dir.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from .conftest import drop_prefix

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
STORE, APP = "scale", "app"
TENANTS = ("t0", "t1", "t2")
ADDS = 6  # per tenant, plus one in a thread that is deleted
THREAD = -1  # the add number of that one
DELETED = (0, 1)  # of each tenant's adds, the memories deleted afterwards
MAX_RECEIVES = 5


@pytest.fixture()
def engines(opensearch_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Own table, queue (with its dead-letter queue) and index prefix on the running engines; gone afterwards."""
    import boto3

    endpoint = os.environ.get("MEMLANE_DYNAMODB_ENDPOINT")
    if not endpoint:
        pytest.skip("MEMLANE_DYNAMODB_ENDPOINT is not set: eval \"$(scripts/engines.sh env)\" first")
    name = f"it-scale-{uuid.uuid4().hex[:10]}"
    aws = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1"}
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test")
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": str(MAX_RECEIVES)})})["QueueUrl"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "AWS_"))}
    env.update(aws)
    env.update({k: v for k, v in os.environ.items() if k.startswith("MEMLANE_OPENSEARCH")})
    env.update(PYTHONPATH=str(ROOT / "shared"), MEMLANE_TABLE="dynamodb", MEMLANE_TABLE_NAME=name,
               MEMLANE_DYNAMODB_ENDPOINT=endpoint, MEMLANE_QUEUE_URL=queue, MEMLANE_SQS_ENDPOINT=endpoint,
               MEMLANE_OPENSEARCH_INDEX_PREFIX=name, MEMLANE_EMBEDDER="hashing", MEMLANE_DATA_DIR=str(tmp_path / "data"),
               MEMLANE_WORKER_MAX_ATTEMPTS=str(MAX_RECEIVES), MEMLANE_WORKER_VISIBILITY_SECONDS="4",
               MEMLANE_WORKER_POLL_SECONDS="1", MEMLANE_DREAM_INTERVAL_SECONDS="0", MEMLANE_SHUTDOWN_GRACE_SECONDS="5",
               # Every add states a fact of one shape ("I prefer <keyword> with lunch"), so that each is found
               # by its own keyword; superseding one with the next is consolidation, tested on its own.
               MEMLANE_CONSOLIDATE_ON_WRITE="false")
    made = subprocess.run([sys.executable, "-m", "memlane.cli", "schema", "create"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    env["MEMLANE_SCHEMA_POLICY"] = "validate"  # made once above; every process only checks it
    try:
        yield env
    finally:
        sqs.delete_queue(QueueUrl=queue)
        sqs.delete_queue(QueueUrl=dlq)
        dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                                aws_secret_access_key="test")
        dynamodb.delete_table(TableName=name)
        from opensearchpy import OpenSearch

        client = OpenSearch(opensearch_url)
        drop_prefix(client, name)
        client.close()


class Process:
    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "memlane.cli", *args], env=env, stdout=self._out,
                                     stderr=subprocess.STDOUT, cwd=log.parent)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture()
def cluster(engines: dict[str, str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    ports = [free_port(), free_port()]
    servers = [Process(["serve", "--no-worker", "--port", str(p)], engines, tmp_path / f"server{n}.log")
               for n, p in enumerate(ports)]
    probes = [free_port(), free_port()]
    workers = [Process(["worker", "--threads", "2", "--health-port", str(p)], engines, tmp_path / f"worker{n}.log")
               for n, p in enumerate(probes)]
    try:
        for process in servers + workers:
            wait_until(lambda: process.proc.poll() is not None or "memlane worker:" in process.text()
                       or "memlane http://" in process.text(), 90, f"{process.log.name} to start")
            assert process.proc.poll() is None, process.text()
        yield {"urls": [f"http://127.0.0.1:{p}" for p in ports], "servers": servers, "workers": workers,
               "probes": [f"http://127.0.0.1:{p}/health" for p in probes],
               "data_dir": Path(engines["MEMLANE_DATA_DIR"])}
    finally:
        for process in servers + workers:
            process.stop()


STARTED = re.compile(r"extract job (\S+) of \S+: delivery (\d+) started")
DONE = re.compile(r"extract job (\S+): delivery (\d+) done")
TENANT_OF = re.compile(r"extract job (\S+) of [^/\s]+/[^/\s]+/(\S+): delivery \d+ started")


def in_flight(log: str) -> dict[str, str]:
    """The extraction jobs a worker's log shows started and not done, each with its tenant."""
    done = {m.group(1) for m in DONE.finditer(log)}
    return {m.group(1): m.group(2) for m in TENANT_OF.finditer(log) if m.group(1) not in done}


def kill_holding_jobs(worker: Process, finished: Any) -> set[str]:
    """SIGKILL `worker` at a moment it holds a job whose task is not finished: stopped first (SIGSTOP), so what its
    log shows in flight is what it holds when killed; resumed and tried again when it holds none. A job it has
    finished but not yet logged done (the task SUCCEEDED, the message not yet deleted) is not one: the jobs returned
    are those `finished(request_id, tenant)` says are not."""
    for _ in range(600):
        worker.proc.send_signal(signal.SIGSTOP)
        held = {r for r, tenant in in_flight(worker.text()).items() if not finished(r, tenant)}
        if held:
            worker.proc.send_signal(signal.SIGKILL)
            worker.proc.wait(10)
            return held
        worker.proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the worker never held an unfinished job under load")


def token(tenant: str, n: int) -> str:
    return f"kw{tenant}n{n + 1}zz"  # one keyword per add, unique across tenants


def each_tenant(work: Any) -> None:
    """`work(tenant)` for every tenant at once, each in its own thread; the first error is raised."""
    errors: list[BaseException] = []

    def run(tenant: str) -> None:
        try:
            work(tenant)
        except BaseException as error:  # noqa: BLE001 — raised on the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(t,)) for t in TENANTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]


def test_two_servers_and_two_workers_lose_nothing_duplicate_nothing_cross_no_tenant(cluster: dict[str, Any]) -> None:
    from memlane.sdk import Memlane

    clients = [Memlane(url) for url in cluster["urls"]]
    for probe in cluster["probes"]:  # what a load balancer or an orchestrator asks each worker
        answer = httpx.get(probe, timeout=10)
        assert answer.status_code == 200 and answer.json()["threads"] == {"configured": 2, "alive": 2}
    clients[0].stores.create(STORE)
    crossings: list[str] = []
    accepted: dict[str, dict[int, str]] = {t: {} for t in TENANTS}  # tenant -> add number -> request id
    half = threading.Barrier(len(TENANTS) + 1)  # the kill comes once every tenant sent half its adds

    def check_scope(tenant: str, results: Any) -> None:
        for hit in results:
            if (hit.scope.app_id, hit.scope.tenant_id) != (APP, tenant):
                crossings.append(f"{tenant} saw {hit.scope.app_id}/{hit.scope.tenant_id}: {hit.text}")

    def load(tenant: str) -> None:
        scope = {"app_id": APP, "tenant_id": tenant}
        try:
            thread = clients[1].threads.create(STORE, scope, thread_id=f"th-{tenant}")
            accepted[tenant][THREAD] = clients[0].memories.add(
                STORE, {**scope, "run_id": thread.thread_id},
                [{"role": "user", "content": f"I prefer {token(tenant, THREAD)} with lunch"}]).request_id
            for n in range(ADDS):
                if n == ADDS // 2:
                    half.wait(60)
                answer = clients[n % 2].memories.add(STORE, scope, [{  # the servers in turn
                    "role": "user", "content": f"I prefer {token(tenant, n)} with lunch"}])
                accepted[tenant][n] = answer.request_id
                check_scope(tenant, clients[(n + 1) % 2].memories.search(STORE, "prefer lunch", scope).results)
        except BaseException:
            half.abort()
            raise

    failed: list[BaseException] = []

    def load_all() -> None:
        try:
            each_tenant(load)
        except BaseException as error:  # noqa: BLE001 — raised on the main thread
            failed.append(error)

    loading = threading.Thread(target=load_all)
    loading.start()
    try:
        half.wait(60)
    except threading.BrokenBarrierError:
        loading.join(60)
        raise failed[0] if failed else AssertionError("the load never reached its half")
    killed, survivor = cluster["workers"]
    held = kill_holding_jobs(killed, lambda request_id, tenant: clients[0].tasks.get(
        STORE, request_id, app_id=APP, tenant_id=tenant).status == "SUCCEEDED")
    loading.join(180)
    if failed:
        raise failed[0]
    assert killed.proc.returncode == -signal.SIGKILL
    assert all(len(accepted[t]) == ADDS + 1 for t in TENANTS), accepted

    # Every accepted add's task SUCCEEDED, read from either server, each with its one memory; one task each.
    memory_of: dict[tuple[str, int], str] = {}

    def finished(tenant: str) -> None:
        for n, request_id in accepted[tenant].items():
            task = clients[n % 2].tasks.wait(STORE, request_id, app_id=APP, tenant_id=tenant, timeout=90)
            assert task.status == "SUCCEEDED", (tenant, n, task.error)
            texts = [m.text for m in task.memories]
            assert len(texts) == 1 and token(tenant, n) in texts[0], texts
            memory_of[(tenant, n)] = task.memories[0].memory_id
        tasks = [t.request_id for t in clients[0].tasks.list(STORE, app_id=APP, tenant_id=tenant)]
        assert sorted(tasks) == sorted(accepted[tenant].values())

    each_tenant(finished)
    assert len(set(memory_of.values())) == len(memory_of)  # no memory shared or written twice

    # The jobs the killed worker held unfinished were delivered again and finished by the other. (One it had finished
    # but not yet logged done, its message not yet deleted, was left out at the kill: it comes back only after the
    # visibility timeout, and finds its task SUCCEEDED.)
    redone = {m.group(1) for m in STARTED.finditer(survivor.text()) if int(m.group(2)) > 1}
    assert held <= redone, (held, redone)
    assert held <= {m.group(1) for m in DONE.finditer(survivor.text())}

    def delete_some(tenant: str) -> None:  # some memories, and the thread (its add's memory with it)
        for n in DELETED:
            clients[n % 2].memories.delete(STORE, memory_of[(tenant, n)], app_id=APP, tenant_id=tenant)
        assert clients[1].threads.delete(STORE, f"th-{tenant}", app_id=APP, tenant_id=tenant).memories == 1

    each_tenant(delete_some)

    def searchable(tenant: str) -> None:  # from either server: each standing add once, none deleted
        scope = {"app_id": APP, "tenant_id": tenant}
        stored = list(clients[0].memories.list(STORE, scope))
        check_scope(tenant, stored)
        for n in accepted[tenant]:
            standing = n not in DELETED and n != THREAD
            assert sum(token(tenant, n) in m.text for m in stored) == (1 if standing else 0), n
            for client in clients:
                found = client.memories.search(STORE, token(tenant, n), scope).results
                check_scope(tenant, found)
                assert [hit.memory_id for hit in found if token(tenant, n) in hit.text] \
                    == ([memory_of[(tenant, n)]] if standing else []), (tenant, n, [hit.text for hit in found])

    each_tenant(searchable)
    assert crossings == []
    assert not cluster["data_dir"].exists()  # shared engines only: no process wrote local files
    for client in clients:
        client.close()
    survivor.proc.send_signal(signal.SIGTERM)  # a graceful stop: nothing in hand, exit 0
    assert survivor.proc.wait(30) == 0, survivor.text()[-2000:]
    assert "memlane worker stopped:" in survivor.text()


def test_a_server_runs_its_own_worker_over_the_shared_queue_and_stops_cleanly(engines: dict[str, str],
                                                                               tmp_path: Path) -> None:
    """Without --no-worker, a server over shared engines consumes the shared queue itself (a deployment of
    one process, or servers that also work); SIGTERM stops both and exits 0."""
    from memlane.sdk import Memlane

    port = free_port()
    server = Process(["serve", "--port", str(port)], engines, tmp_path / "server.log")
    try:
        wait_until(lambda: server.proc.poll() is not None or "memlane http://" in server.text(), 90, "the server")
        assert "worker: 2 thread(s)" in server.text()
        with Memlane(f"http://127.0.0.1:{port}") as client:
            client.stores.create(STORE)
            scope = {"app_id": APP, "tenant_id": "solo"}
            added = client.memories.add(STORE, scope, [{"role": "user", "content": "I prefer kwsolozz with lunch"}])
            task = client.tasks.wait(STORE, added.request_id, app_id=APP, tenant_id="solo", timeout=60)
            assert task.status == "SUCCEEDED"
            assert [hit.memory_id for hit in client.memories.search(STORE, "kwsolozz", scope).results] \
                == [task.memories[0].memory_id]
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0, server.text()[-2000:]
        assert "memlane worker stopped: 1 done" in server.text()
    finally:
        server.stop()
