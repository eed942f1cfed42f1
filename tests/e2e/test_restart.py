"""Restarting the server loses nothing — including a job accepted but not yet extracted."""

import pytest

from memlane.bootstrap import build_local
from memlane.client import MemlaneClient
from memlane.config import Settings
from memlane.services import ingest, stores

from .conftest import Server

pytestmark = pytest.mark.e2e
SCOPE = {"app_id": "a", "tenant_id": "t", "agent_id": "g", "run_id": "r"}


def test_queued_job_is_extracted_after_restart(tmp_path):
    data = tmp_path / "data"
    # Accept an add while no worker runs (as if the process died right after answering 202).
    # The server's own embedder (auto: MiniLM): a store's vectors come from one model (embedder_guard).
    svc = build_local(Settings.from_env(env={}, data_dir=data, reranker="none"))
    stores.create(svc.deps, name="demo")
    task = ingest.add(svc.deps, "demo", scope=SCOPE, messages=[
        {"role": "user", "content": "My sister Clara lives in Lisbon and teaches piano."}])
    assert svc.queue.pending() == 1
    svc.close()

    server = Server(data).start()
    try:
        done = MemlaneClient(server.url).wait_task("demo", task.request_id, timeout=60)
        assert done["status"] == "SUCCEEDED" and "Lisbon" in done["memories"][0]["text"]
    finally:
        server.stop()


def test_hard_kill_and_restart_keeps_everything(tmp_path):
    data = tmp_path / "data"
    server = Server(data).start()
    c = MemlaneClient(server.url)
    c.create_store("demo")
    rid = c.add("demo", SCOPE, text="The office wifi password rotates every Monday.", request_id="req-42")["request_id"]
    c.wait_task("demo", rid)
    server.kill()  # SIGKILL: no clean shutdown

    server = Server(data).start()
    try:
        c = MemlaneClient(server.url)
        assert c.get_task("demo", "req-42")["status"] == "SUCCEEDED"
        assert "wifi" in c.search("demo", "wifi password", {"app_id": "a", "tenant_id": "t"})[0]["text"]
        assert c.messages("demo", SCOPE)["messages"][0]["content"].startswith("The office wifi")
        # and the replay of the same add is recognised after the restart
        assert c.add("demo", SCOPE, text="The office wifi password rotates every Monday.",
                     request_id="req-42")["request_id"] == "req-42"
        assert len(c.messages("demo", SCOPE)["messages"]) == 1
    finally:
        server.stop()
