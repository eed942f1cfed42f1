"""`memlane worker`: runs the jobs of a shared queue (SQS or a compatible server) in a process of its own,
beside any number of `memlane serve --no-worker` processes over the same table and index.

Each job runs exactly as the extract Lambda runs it (services.jobs.deliver): the receive count decides when
a job is given up, failures are delivered again, the last delivery the queue allows fails the task. What the
Lambda's event source mapping does is done here: `threads` consumers each long-poll for one job, its
visibility is extended while it runs (so no other worker takes a long job), it is deleted when done and handed
back when it failed or the worker stops. A worker killed mid-job extends nothing: its job comes back to
another worker after at most the visibility timeout.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Callable

from .domain.errors import MemlaneError
from .ports import Delivery, Job, JobSource
from .services import jobs
from .services.deps import Deps

log = logging.getLogger("memlane.worker")

Say = Callable[[str], None]
BACKOFF_CAP = 30.0  # seconds between receives while the queue keeps failing
UNHEALTHY_AFTER = 3  # failed receives in a row before /health says the worker cannot work


@dataclass
class Counts:
    """What a worker did since it started (its progress line)."""

    done: int = 0
    retried: int = 0
    given_up: int = 0
    handed_back: int = 0
    receive_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


class QueueWorker:
    """`threads` consumers of `source`, each one job at a time; `start`, then `stop` (or `run` until a signal)."""

    def __init__(self, deps: Deps, source: JobSource, *, threads: int = 2, visibility: int = 60, poll: int = 10,
                 max_attempts: int = 5, grace: float = 20.0, report_every: float = 30.0, say: Say = print):
        self.deps, self.source, self.threads = deps, source, threads
        self.visibility, self.poll, self.grace, self.report_every = visibility, poll, grace, report_every
        self.say = say
        # The queue's own dead-letter threshold wins: a job is given up on its last delivery before SQS
        # moves it (MEMLANE_WORKER_MAX_ATTEMPTS should match the redrive policy's maxReceiveCount).
        self.dead_letter_after = source.max_receives()
        self.max_receives = self.dead_letter_after or max_attempts
        if self.dead_letter_after is not None and self.dead_letter_after != max_attempts:
            log.warning("the queue dead-letters after %d receives, MEMLANE_WORKER_MAX_ATTEMPTS is %d: using %d",
                        self.dead_letter_after, max_attempts, self.dead_letter_after)
        self.counts = Counts()
        self._stopping = threading.Event()  # take no new job
        self._closed = threading.Event()  # stopped: nothing left in hand to keep hidden
        self._running: dict[str, Delivery] = {}  # handle -> delivery being worked on
        self._lock = threading.Lock()
        self._consumers: list[threading.Thread] = []
        self._failing: dict[str, tuple[int, str]] = {}  # consumer -> failed receives in a row, the last error
        self._ticker: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        dlq = (f"dead-letter queue after {self.dead_letter_after} receives" if self.dead_letter_after
               else "no dead-letter queue: jobs given up on are deleted")
        self.say(f"memlane worker: {self.threads} thread(s), visibility {self.visibility}s, long poll {self.poll}s, "
                 f"gives a job up on delivery {self.max_receives}, {dlq}")
        for n in range(self.threads):
            thread = threading.Thread(target=self._consume, name=f"memlane-worker-{n}", daemon=True)
            thread.start()
            self._consumers.append(thread)
        self._ticker = threading.Thread(target=self._tick, name="memlane-worker-ticker", daemon=True)
        self._ticker.start()

    def stop(self, grace: float | None = None) -> None:
        """Take no new job; running ones get `grace` seconds to finish; the rest are handed back at once (their
        threads are abandoned: the process is about to end, and the job's next delivery redoes it)."""
        grace = self.grace if grace is None else grace
        self._stopping.set()
        deadline = time.monotonic() + grace
        with self._idle:
            while self._running and time.monotonic() < deadline:
                self._idle.wait(min(0.5, max(0.0, deadline - time.monotonic())))
            left = list(self._running.values())
            self._running.clear()
        for delivery in left:
            self._hand_back(delivery, 0, "stopping before it finished")
        self._closed.set()
        for thread in self._consumers:  # those polling return within the long poll; the abandoned never
            thread.join(timeout=0 if left else self.poll + 5)
        self.say(f"memlane worker stopped: {self.progress()}")

    def run(self) -> None:
        """Start, work until SIGTERM/SIGINT (a second one: at once, no grace), stop. On the main thread."""
        hurry = threading.Event()
        stop = threading.Event()

        def on_signal(signum: int, _frame: Any) -> None:
            if stop.is_set():
                hurry.set()
                return
            log.warning("%s: stopping (running jobs get %.0fs, the rest are handed back)",
                        signal.Signals(signum).name, self.grace)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        while not stop.wait(0.5):
            pass
        self._stopping.set()
        stopper = threading.Thread(target=self.stop, name="memlane-worker-stop", daemon=True)
        stopper.start()
        while stopper.is_alive() and not hurry.is_set():
            stopper.join(0.2)
        if hurry.is_set():  # the second signal: hand back what runs now, no grace
            with self._lock:
                left = list(self._running.values())
                self._running.clear()
            for delivery in left:
                self._hand_back(delivery, 0, "stopped at once")

    # -- health --------------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Whether the worker can work — every consumer alive, the queue answering (not UNHEALTHY_AFTER failed
        receives in a row) — and what it did, for a load balancer's or an orchestrator's probe."""
        alive = sum(t.is_alive() for t in self._consumers)
        with self._lock:
            failing = [f for f in self._failing.values() if f[0] >= UNHEALTHY_AFTER]
        reason = (f"{self.threads - alive} of {self.threads} consumer threads ended" if alive < self.threads
                  else f"the queue failed {failing[0][0]} receives in a row: {failing[0][1]}" if failing else "")
        c = self.counts
        return not reason, {
            "status": "unavailable" if reason else "ok", **({"reason": reason} if reason else {}),
            "threads": {"configured": self.threads, "alive": alive}, "running": self.running,
            "done": c.done, "retried": c.retried, "given_up": c.given_up, "handed_back": c.handed_back,
            "receive_errors": c.receive_errors}

    def serve_health(self, host: str, port: int) -> HTTPServer:
        """GET /health on host:port (200 or 503 with health()'s document), served by a thread of its own;
        `shutdown()` the returned server to stop it."""
        worker = self

        class Probe(BaseHTTPRequestHandler):
            timeout = 5  # a client that stalls cannot hold the probe

            def do_GET(self) -> None:  # noqa: N802 — the standard library's name
                if self.path.split("?")[0] != "/health":
                    return self._send(404, {"error": {"code": "not_found", "message": "only GET /health"}})
                ok, document = worker.health()
                self._send(200 if ok else 503, document)

            def _send(self, status: int, document: dict[str, Any]) -> None:
                body = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # probes every few seconds: not worth a log line
                pass

        server = HTTPServer((host, port), Probe)
        threading.Thread(target=server.serve_forever, name="memlane-worker-health", daemon=True).start()
        return server

    def progress(self) -> str:
        c = self.counts
        line = (f"{c.done} done, {c.retried} retried, {c.given_up} given up, {c.handed_back} handed back, "
                f"{self.running} running, {c.receive_errors} receive errors")
        depth = self.deps.queue.health().depth if self.deps is not None else None  # None: the queue cannot tell
        return line if depth is None else f"{line}; queue {depth} waiting or in flight"

    def _tick(self) -> None:
        """Extend the visibility of the jobs in hand (every third of it; through the grace period of a stop
        too), and print progress now and then."""
        beat = max(1.0, self.visibility / 3)
        last_report = time.monotonic()
        while not self._closed.wait(beat):
            with self._lock:
                running = list(self._running.values())
            for delivery in running:
                try:
                    self.source.extend(delivery, self.visibility)
                except MemlaneError as error:  # gone or unreachable: at worst the job runs twice (idempotent)
                    log.warning("could not extend job %s: %s", delivery.message_id, error.message)
            if self.report_every and time.monotonic() - last_report >= self.report_every:
                last_report = time.monotonic()
                self.say(f"memlane worker: {self.progress()}")

    # -- one consumer --------------------------------------------------------------------------------

    def _consume(self) -> None:
        me = threading.current_thread().name
        failures = 0
        while not self._stopping.is_set():
            try:
                received = self.source.receive(1, wait_seconds=self.poll, visibility_seconds=self.visibility)
                failures = 0
                with self._lock:
                    self._failing.pop(me, None)
            except Exception as error:  # noqa: BLE001 — the queue is down, throttling, or its client broke:
                failures += 1           # back off and keep trying; a consumer that died would take no job again
                why = error.message if isinstance(error, MemlaneError) else f"{type(error).__name__}: {error}"
                with self._lock:
                    self._failing[me] = (failures, why)
                self.counts.add("receive_errors")
                log.warning("receive failed (%s); retrying", why, exc_info=not isinstance(error, MemlaneError))
                self._stopping.wait(min(BACKOFF_CAP, 2.0 ** failures))
                continue
            for delivery in received:
                if self._stopping.is_set():  # received while stopping: back to the queue untouched
                    self._hand_back(delivery, 0, "received while stopping")
                    continue
                with self._lock:
                    self._running[delivery.handle] = delivery
                try:
                    self._work(delivery)
                except Exception:  # noqa: BLE001 — a consumer thread must outlive anything one job does
                    log.exception("settling job %s failed; it comes back after its visibility timeout",
                                  delivery.message_id)
                finally:
                    with self._idle:
                        self._running.pop(delivery.handle, None)
                        self._idle.notify_all()

    def _work(self, delivery: Delivery) -> None:
        if delivery.job is None:
            log.error("message %s is not a job (%s)", delivery.message_id, delivery.problem)
            return self._give_up_message(delivery)
        job = delivery.job
        log.info("%s job %s of %s: delivery %d started", job.kind, job.request_id, job.group or job.store,
                 delivery.receives)
        gave_up: list[str] = []

        def record_give_up(job: Job, receives: int, reason: str) -> None:
            log.error("giving up on %s job %s (delivery %d): %s", job.kind, job.request_id, receives, reason)
            gave_up.append(reason)

        def will_retry(job: Job, receives: int, reason: str) -> None:
            log.warning("%s job %s failed (delivery %d); it will be retried: %s", job.kind, job.request_id,
                        receives, reason)

        try:
            jobs.deliver(self.deps, job, delivery.receives, self.max_receives, gave_up=record_give_up,
                         will_retry=will_retry)
        except Exception:  # noqa: BLE001 — a failed attempt (logged by deliver's callbacks)
            if gave_up:
                return self._give_up_message(delivery)
            self.counts.add("retried")
            return self._hand_back(delivery, min(self.visibility, 2 ** delivery.receives), "", count=False)
        if not self._still_ours(delivery):
            return  # stopped mid-job and handed back already: the next delivery finds it done
        self.source.done(delivery)
        self.counts.add("done")
        log.info("%s job %s: delivery %d done", job.kind, job.request_id, delivery.receives)

    def _give_up_message(self, delivery: Delivery) -> None:
        """Its task says FAILED (or it was never a job): on to the dead-letter queue, or deleted without one."""
        self.counts.add("given_up")
        if self.dead_letter_after is None:
            self.source.done(delivery)
        else:
            self.source.release(delivery, 0)  # its next receive is past maxReceiveCount: SQS moves it

    def _still_ours(self, delivery: Delivery) -> bool:
        with self._lock:
            return delivery.handle in self._running

    def _hand_back(self, delivery: Delivery, delay: int, why: str, *, count: bool = True) -> None:
        try:
            self.source.release(delivery, delay)
        except MemlaneError as error:  # it comes back after its visibility timeout anyway
            log.warning("could not hand back job %s: %s", delivery.message_id, error.message)
        if count:
            self.counts.add("handed_back")
            log.warning("handed back job %s: %s", delivery.message_id, why)


def work(settings: "Settings") -> None:  # noqa: F821
    """`memlane worker`: the jobs of the shared queue the settings name, until SIGTERM/SIGINT."""
    from . import bootstrap, process

    source = bootstrap.build_job_source(settings)  # Misconfigured before a model is loaded
    deps = bootstrap.build(settings)
    worker = QueueWorker(deps, source, threads=settings.worker_threads, visibility=settings.worker_visibility_seconds,
                         poll=settings.worker_poll_seconds, max_attempts=settings.worker_max_attempts,
                         grace=settings.shutdown_grace_seconds, report_every=settings.worker_report_seconds,
                         say=lambda line: print(line, flush=True))
    print(f"memlane worker on {settings.queue_url} (table {settings.table_name}, embedder {deps.embedder.name})",
          flush=True)
    probe = None
    if settings.worker_health_port is not None:
        probe = worker.serve_health(settings.worker_health_host, settings.worker_health_port)
        print(f"health on http://{settings.worker_health_host}:{probe.server_address[1]}/health", flush=True)
    process.settle()
    try:
        worker.run()
    finally:
        if probe is not None:
            probe.shutdown()
