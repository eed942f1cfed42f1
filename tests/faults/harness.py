"""Crash `memlane serve` at a named point, restart it, and check that nothing was lost.

Each schedule: copy a seeded data dir; start `memlane serve` (server.serve, in a forked child of this
already-initialised process — a fresh interpreter costs seconds, a fork milliseconds, which is what
lets CI afford hundreds of schedules) armed with MEMLANE_FAULTS; run a small workload of adds (async
and sync), explicit writes, edits, a dream and a tenant erasure over HTTP until the process dies at its
crash point; restart it unarmed; wait for every task and queued job to finish; stop it; then check the
invariants on what is on disk:

  1. every accepted message, and every memory an explicit write was answered for, is readable (through the API);
  2. every task, dream and erasure ended SUCCEEDED or FAILED within the bound;
  3. no memory twice: within a scope, no two active memories with the same text;
  4. table and index agree: the same memory ids with the same status, and every message is a
     message document (searchable), none left behind by an erasure.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import shutil
import signal
import sqlite3
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlane.adapters.embedders.hashing import HashingEmbedder
from memlane.bootstrap import build_local
from memlane.config import Settings
from memlane.faults import CRASH_EXIT_CODE
from memlane.services import stores

STORE = "demo"
APP = "app"
TENANTS = ("t0", "t1")
ERASED = "gone"  # a tenant whose data the workload erases
FINISHED = ("SUCCEEDED", "FAILED")
BOUND_SECONDS = 30.0  # every task must finish within this after the restart


def settings(data: Path, faults: str = "") -> Settings:
    return Settings.from_env(env={}, data_dir=data, port=0, embedder="hashing", reranker="none", faults=faults,
                             dream_interval_seconds=0, sweep_interval_seconds=0, shutdown_grace_seconds=5,
                             log_level="WARNING")


def seed(data: Path) -> None:
    svc = build_local(settings(data), embedder=HashingEmbedder())
    stores.create(svc.deps, name=STORE)
    svc.close()


class Child:
    """`memlane serve` in a forked process; its URL read from what serve() prints."""

    def __init__(self, data: Path, faults: str = ""):
        self.out = data.parent / f"serve-{time.monotonic_ns()}.log"
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            code = 1
            try:
                fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                # pytest's capture replaced sys.stdout/stderr and the log handlers: point them at the file.
                sys.stdout = sys.stderr = open(2, "w", buffering=1, closefd=False)
                logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)
                from memlane.server import serve

                serve(settings(data, faults))
                code = 0
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        self.status: int | None = None
        try:
            self.url = self._await_url()
        except BaseException:
            self.kill()
            raise

    def _await_url(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.out.read_text() if self.out.exists() else ""
            for line in text.splitlines():
                if line.startswith("memlane http://"):
                    return line.split()[1]
            if self.dead():
                raise RuntimeError(f"serve exited ({self.status}): {text}")
            time.sleep(0.01)
        raise TimeoutError("serve did not start")

    def dead(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status is not None

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.dead():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL if it does not go."""
        if not self.dead():
            os.kill(self.pid, signal.SIGTERM)
            if not self.wait(20):
                os.kill(self.pid, signal.SIGKILL)
                self.wait(20)

    def kill(self) -> None:
        if not self.dead():
            os.kill(self.pid, signal.SIGKILL)
            self.wait(20)


def call(url: str, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@dataclass
class Workload:
    """What the client sent and what the server acknowledged."""

    accepted: dict[str, tuple[dict[str, str], list[str]]] = field(default_factory=dict)  # request_id → (scope, texts)
    written: dict[str, str] = field(default_factory=dict)  # memory id an explicit write was answered for → tenant
    sent: int = 0
    dreams: list[str] = field(default_factory=list)
    erasures: list[str] = field(default_factory=list)
    # An erasure was sent: answered (in `erasures`) or not — the server may have died after committing it, and its
    # job erases the tenant after the restart (a random schedule: a worker crashed while the request was in flight).
    erasure_sent: bool = False

    broken: bool = False  # the server died under a request

    def run(self, url: str, rng: random.Random, steps: int) -> None:
        """Send `steps` operations; stops quietly when the server dies under it."""
        try:
            for step in range(steps):
                self._step(url, rng, step)
        except DIED:
            self.broken = True

    def _step(self, url: str, rng: random.Random, step: int) -> None:
        roll = rng.random()
        if step % 6 == 4:  # a dream now and then, over what the adds before it produced
            status, body = call(url, "POST", f"/v1/stores/{STORE}/dream",
                                {"scope": {"app_id": APP, "tenant_id": rng.choice(TENANTS)}})
            if status == 202:
                self.dreams.append(body["task_id"])
            return
        if step % 6 == 2:  # an edit of a memory, now and then (the index must follow it, as the table)
            tenant = rng.choice(TENANTS)
            status, body = call(url, "GET", f"/v1/stores/{STORE}/memories?app_id={APP}&tenant_id={tenant}&limit=1")
            if status == 200 and body["memories"]:
                call(url, "PATCH", f"/v1/stores/{STORE}/memories/{body['memories'][0]['memory_id']}",
                     {"app_id": APP, "tenant_id": tenant, "text": f"{tenant} edited note {step}: the "
                                                                  f"{rng.choice(WORDS)} moved."})
                return
        if step % 6 == 3:  # an explicit write (infer: false): table, then index, as an edit
            tenant = rng.choice((*TENANTS, ERASED))
            ids = [f"x{step}-{i}-{rng.randrange(10**6)}" for i in range(rng.randrange(1, 4))]
            status, _ = call(url, "POST", f"/v1/stores/{STORE}/memories", {
                "scope": {"app_id": APP, "tenant_id": tenant}, "infer": False,
                "memories": [{"memory_id": i, "text": f"{tenant} wrote {i}: the {rng.choice(WORDS)} called."}
                             for i in ids]})
            if status == 201:
                self.written.update(dict.fromkeys(ids, tenant))
            return
        if step == 6:
            self.erasure_sent = True
            status, body = call(url, "POST", "/v1/tenants/erase", {"app_id": APP, "tenant_id": ERASED})
            if status == 202:
                self.erasures.append(body["erasure_id"])
            return
        tenant = ERASED if roll < 0.15 else rng.choice(TENANTS)
        scope = {"app_id": APP, "tenant_id": tenant, "agent_id": "bot", "run_id": f"run{rng.randrange(2)}"}
        rid = f"req-{step}-{rng.randrange(10**6)}"
        n = rng.randrange(1, 4)
        texts = [f"{tenant} note {step}.{i}: the {rng.choice(WORDS)} meets the {rng.choice(WORDS)} on "
                 f"{rng.choice(DAYS)} at {rng.randrange(1, 12)} o'clock." for i in range(n)]
        body = {"scope": scope, "request_id": rid, "sync": rng.random() < 0.3,
                "messages": [{"role": "user", "content": t} for t in texts]}
        self.sent += 1
        status, _ = call(url, "POST", f"/v1/stores/{STORE}/memories", body)
        if status in (200, 202):
            self.accepted[rid] = (scope, texts)


# What a request sees when the server dies under it.
DIED = (ConnectionError, urllib.error.URLError, http.client.HTTPException, OSError)
WORDS = ("courier", "piano teacher", "landlord", "dentist", "plumber", "cousin", "editor", "coach", "pilot", "vet")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def wait_all_finished(url: str, work: Workload, bound: float = BOUND_SECONDS) -> list[str]:
    """Poll until every task, dream and erasure is finished; returns what is still open at the bound."""
    deadline = time.monotonic() + bound
    while True:
        open_ = _open_work(url, work) or _queued(url)
        if not open_ or time.monotonic() > deadline:
            return open_
        time.sleep(0.05)


def _queued(url: str) -> list[str]:
    """Jobs no task names (an edit's or an explicit write's index job) are waited for too."""
    status, body = call(url, "GET", "/health")
    depth = body.get("worker", {}).get("queue_depth") if isinstance(body, dict) else None
    return [f"{depth} jobs queued"] if depth else []


def _open_work(url: str, work: Workload) -> list[str]:
    open_ = []
    for tenant in (*TENANTS, ERASED):
        status, page = call(url, "GET", f"/v1/stores/{STORE}/tasks?app_id={APP}&tenant_id={tenant}&limit=200")
        assert status == 200, page
        open_ += [f"task {t['request_id']} {t['status']}" for t in page["tasks"] if t["status"] not in FINISHED]
        status, page = call(url, "GET", f"/v1/stores/{STORE}/dream-tasks?app_id={APP}&tenant_id={tenant}&limit=200")
        assert status == 200, page
        open_ += [f"dream {d['task_id']} {d['status']}" for d in page["tasks"] if d["status"] not in FINISHED]
    for erasure_id in work.erasures:
        status, body = call(url, "GET", f"/v1/erasures/{erasure_id}")
        if status == 200 and body["status"] not in FINISHED:
            open_.append(f"erasure {erasure_id} {body['status']}")
    for rid in work.accepted:
        status, body = call(url, "GET", f"/v1/stores/{STORE}/tasks/{rid}")
        erased = work.accepted[rid][0]["tenant_id"] == ERASED and work.erasure_sent
        if status == 200 and body["status"] not in FINISHED:
            open_.append(f"task {rid} {body['status']}")
        elif status == 404 and not erased:
            open_.append(f"task {rid} lost")
    return open_


def check_messages(url: str, work: Workload) -> list[str]:
    problems = []
    erased = work.erasure_sent
    for rid, (scope, texts) in work.accepted.items():
        if scope["tenant_id"] == ERASED and erased:
            continue  # erased on request: gone is right
        query = "&".join(f"{k}={v}" for k, v in scope.items())
        status, page = call(url, "GET", f"/v1/stores/{STORE}/messages?{query}&limit=200")
        have = {m["content"] for m in page.get("messages", [])} if status == 200 else set()
        problems += [f"message of {rid} lost: {t!r}" for t in texts if t not in have]
    for memory_id, tenant in work.written.items():
        if tenant == ERASED and erased:
            continue
        status, _ = call(url, "GET", f"/v1/stores/{STORE}/memories/{memory_id}?app_id={APP}&tenant_id={tenant}")
        if status != 200:
            problems.append(f"explicit memory {memory_id} of {tenant} lost ({status})")
    return problems


def check_disk(data: Path) -> list[str]:
    """No duplicate memory; table and index agree. Read with the server stopped."""
    table = sqlite3.connect(f"file:{data / 'table.db'}?mode=ro", uri=True)
    index = sqlite3.connect(f"file:{data / 'index.db'}?mode=ro", uri=True)
    try:
        rows = table.execute("SELECT sk, body FROM items WHERE sk LIKE 'MEM#%' AND pk LIKE ?",
                             (f"{STORE}#%",)).fetchall()
        said = {json.loads(body)["message_id"] for (body,) in table.execute(
            "SELECT body FROM items WHERE sk LIKE 'MSG#%' AND pk LIKE ?", (f"{STORE}#%",)).fetchall()}
        indexed = index.execute("SELECT memory_id, status, text FROM docs WHERE store = ? AND record_type = 'memory'",
                                (STORE,)).fetchall()
        message_docs = {r[0] for r in index.execute(
            "SELECT memory_id FROM docs WHERE store = ? AND record_type = 'message'", (STORE,)).fetchall()}
    finally:
        table.close()
        index.close()
    problems = []
    memories = {sk[4:]: json.loads(body) for sk, body in rows}
    seen: dict[tuple[str, str], str] = {}
    for mid, m in memories.items():
        if m.get("status", "active") != "active":
            continue
        key = (json.dumps(m["scope"], sort_keys=True), m["text"])
        if key in seen:
            problems.append(f"duplicate memory {mid} and {seen[key]}: {m['text']!r}")
        seen[key] = mid
    docs = {mid: status for mid, status, _ in indexed}
    table_state = {mid: m.get("status", "active") for mid, m in memories.items()}
    stale = sorted(mid for mid, _, text in indexed if mid in memories and memories[mid]["text"] != text)
    if stale:
        problems.append(f"the index holds another text than the table (an edit not followed): {stale}")
    if table_state != docs:
        only_table = sorted(set(table_state) - set(docs))
        only_index = sorted(set(docs) - set(table_state))
        differ = sorted(k for k in set(docs) & set(table_state) if docs[k] != table_state[k])
        problems.append(f"table and index disagree: only in table {only_table}, only in index {only_index}, "
                        f"status differs {differ}")
    if said != message_docs:
        problems.append(f"messages and their documents disagree: not searchable {sorted(said - message_docs)}, "
                        f"left in the index {sorted(message_docs - said)}")
    return problems


@dataclass
class Outcome:
    crashed: bool
    accepted: int
    problems: list[str]


def run_schedule(template: Path, work_dir: Path, faults: str, seed_: int, steps: int = 8) -> Outcome:
    data = work_dir / "data"
    shutil.copytree(template, data)
    rng = random.Random(seed_)
    work = Workload()
    child = Child(data, faults)
    try:
        work.run(child.url, rng, steps)
        if not work.broken:  # the crash point may be in a background job: give the workers time to reach it
            try:
                wait_all_finished(child.url, work, bound=10)
            except DIED:
                work.broken = True
        if work.broken:
            child.wait(10)  # let it finish dying
    finally:
        crashed = child.dead() and child.status == CRASH_EXIT_CODE
        child.kill()
    problems = [] if child.status in (CRASH_EXIT_CODE, -signal.SIGKILL) else [f"first run exited {child.status}"]
    restarted = Child(data)
    try:
        problems += wait_all_finished(restarted.url, work)
        problems += check_messages(restarted.url, work)
    finally:
        restarted.stop()
    if restarted.status != 0:
        problems.append(f"restarted server exited {restarted.status}: {restarted.out.read_text()[-2000:]}")
    problems += check_disk(data)
    if problems:
        problems.append(f"schedule {faults!r} seed {seed_}; first run log: {child.out.read_text()[-3000:]}")
    else:
        shutil.rmtree(work_dir, ignore_errors=True)
    return Outcome(crashed=crashed, accepted=len(work.accepted), problems=problems)
