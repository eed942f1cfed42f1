"""Issue 15 #3 and #8: a stopped or killed server strands no job; a data dir has one owner at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from memlane.client import MemlaneClient

from .conftest import Server, free_port

pytestmark = pytest.mark.e2e
SCOPE = {"app_id": "a", "tenant_id": "t", "agent_id": "g", "run_id": "r"}
# Extraction costs about a quarter of a second per message here: long enough to be caught running.
SLOW = [{"role": "user", "content": f"Fact {n}: the courier for warehouse {n} arrives on weekday {n % 7} at dawn."}
        for n in range(60)]


def wait_status(client, rid, wanted, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get_task("demo", rid)["status"]
        if status in wanted:
            return status
        time.sleep(0.05)
    raise TimeoutError(f"task {rid} never reached {wanted}")


def start(data, **env):
    server = Server(data)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return server.start()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def test_sigterm_during_a_job_then_restart_finishes_it_well_within_the_lease(tmp_path):
    data = tmp_path / "data"
    server = start(data, MEMLANE_SHUTDOWN_GRACE_SECONDS="0", MEMLANE_EMBEDDER="hashing")
    client = MemlaneClient(server.url)
    client.create_store("demo")
    rid = client.add("demo", SCOPE, messages=SLOW, request_id="slow-1")["request_id"]
    assert wait_status(client, rid, {"RUNNING", "SUCCEEDED"}) == "RUNNING"
    server.proc.terminate()  # SIGTERM: the lease of the running job is handed back
    assert server.proc.wait(30) == 0
    server = start(data, MEMLANE_EMBEDDER="hashing")
    try:
        # Before: RUNNING for the whole 300 s lease. The bound here is far below it.
        done = MemlaneClient(server.url).wait_task("demo", rid, timeout=120)
        assert done["status"] == "SUCCEEDED" and len(done["memories"]) == len(SLOW)
    finally:
        server.stop()


def test_kill_9_during_a_job_then_restart_finishes_it_well_within_the_lease(tmp_path):
    data = tmp_path / "data"
    server = start(data, MEMLANE_EMBEDDER="hashing")
    client = MemlaneClient(server.url)
    client.create_store("demo")
    rid = client.add("demo", SCOPE, messages=SLOW, request_id="slow-2")["request_id"]
    assert wait_status(client, rid, {"RUNNING", "SUCCEEDED"}) == "RUNNING"
    server.kill()  # SIGKILL: no goodbye; the kernel drops the data-dir lock
    server = start(data, MEMLANE_EMBEDDER="hashing")
    try:
        done = MemlaneClient(server.url).wait_task("demo", rid, timeout=120)
        assert done["status"] == "SUCCEEDED" and len(done["memories"]) == len(SLOW)
    finally:
        server.stop()


def test_a_second_server_and_a_local_cli_on_the_same_data_dir_are_refused(server):
    port = free_port()
    second = subprocess.run([sys.executable, "-m", "memlane.cli", "--data-dir", str(server.data_dir), "serve",
                             "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert second.returncode != 0 and "in use by another memlane process" in second.stderr
    cli = subprocess.run([sys.executable, "-m", "memlane.cli", "--local", "--data-dir", str(server.data_dir),
                          "stores", "list"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 4 and "in use by another memlane process" in cli.stderr
    assert MemlaneClient(server.url).list_stores() is not None  # the owner is unaffected


def test_a_data_dir_that_cannot_be_written_is_refused_in_one_line(tmp_path):
    """A faults trial: `memlane serve` on a read-only data dir died with a raw traceback (os.chmod). Here a file
    stands where the directory would be (root writes through a read-only mode, so a chmod cannot show it)."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    for command in (["serve", "--port", str(free_port())], ["--local", "stores", "list"]):
        run = subprocess.run([sys.executable, "-m", "memlane.cli", "--data-dir", str(blocked / "data"), *command],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 5, run.stderr
        assert "cannot be used: Not a directory" in run.stderr and "Traceback" not in run.stderr
