"""Lambda entry points: the wiring every functions/<name>/app.py shares, so each of those is one call.

    lambda_handler = build_http_handler(["search"])      # an API function: the routes of those families
    lambda_handler = build_sqs_handler()                 # the extract function: SQS batches of jobs
    build_ingest_queue_handler(rt)                       # the ingest function's ingestion queue: adds

Either builder runs once per container, when the function module is imported: settings are read from
the environment, the adapters built (bootstrap.build), the resolver made. An invocation then only
resolves its event. Observability is Powertools: a JSON Logger whose correlation id is the API
Gateway request id (or, for a job, the add's request_id), Tracer (X-Ray) and EMF metrics in the
"memlane" namespace, with the function's service name (POWERTOOLS_SERVICE_NAME) as dimension:

    Requests, Latency (ms), ServerErrors      every API function (search latency = Latency{service=search})
    MemoriesExtracted, ExtractionFailures,    the extract function (failures: records handed back to SQS;
    TasksFailed                               failed tasks: jobs given up on before the dead-letter queue)
    RerankFallback                            a search whose rerank model call failed, ordered by the
                                              heuristic reranker instead (adapters/rerank_fallback.py)
    QueuedAdds, QueuedAddsRefused,            the ingest function's queue: messages added (or replayed),
    QueuedAddsDeferred                        refused (4xx), handed back for redelivery (429/5xx)

`add` is idempotent on the client's `request_id` by the service itself (services/ingest.py), inside the
route, so a replay is answered only after the caller is authenticated, its grant checked, the request
bound to its tenant and audited: a replay of the same body returns the first task (no second task, no
second queue message), another body is 409 `request_id_reused`. There is deliberately no Powertools
idempotency in front of the resolver: a cached answer served before the grant check hands one caller's
response to another (see docs/security.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from . import bootstrap, process
from .config import Settings
from .services.deps import Deps

# What only one kind of event needs (the extract function's jobs and their record model, the ingestion
# queue's adds, the sweeper) is imported by its builder, so a function imports only what it handles:
# each module is part of every cold start that imports it (docs/benchmarks.md §9).

Event = dict[str, Any]
Handler = Callable[[Event, Any], dict[str, Any]]
Resolve = Callable[[Event, Any], dict[str, Any]]

NAMESPACE = "memlane"


@dataclass
class Runtime:
    """What one container keeps between invocations."""

    settings: Settings
    deps: Deps
    logger: Logger
    tracer: Tracer
    metrics: Metrics


def runtime() -> Runtime:
    settings = Settings.from_env()
    logger = Logger(level=settings.log_level)
    # The core logs through the standard "memlane.*" loggers: give them the JSON format and correlation id.
    copy_config_to_registered_loggers(source_logger=logger, include={"memlane"})
    metrics = Metrics(namespace=NAMESPACE)

    def count(metric: str) -> None:  # what the core's adapters count (RerankFallback), flushed per invocation
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)

    built = Runtime(settings, bootstrap.build(settings, count=count), logger, Tracer(), metrics)
    process.settle()  # a warm container serves many invocations: what it built stays out of the collector's way
    return built


# -- API functions -----------------------------------------------------------------------------


def build_http_handler(families: Sequence[str], rt: Runtime | None = None) -> Handler:
    """The handler of an API function serving the route families `families` (api.app.FAMILIES).
    `rt`: a runtime the function module already built (one that also handles other events)."""
    from .api.app import build_api

    rt = rt or runtime()
    api = build_api(rt.deps, families, auth=bootstrap.auth_mode(rt.settings, rt.deps),
                    audit_retention_days=rt.settings.audit_retention_days)
    resolve: Resolve = api.resolve

    @rt.logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @rt.tracer.capture_lambda_handler(capture_response=False)  # responses carry memories: keep them out of X-Ray
    @rt.metrics.log_metrics
    def lambda_handler(event: Event, context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        response = resolve(event, context)
        rt.metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
        rt.metrics.add_metric(name="Latency", unit=MetricUnit.Milliseconds,
                              value=round((time.perf_counter() - started) * 1000, 3))
        if int(response.get("statusCode", 500)) >= 500:
            rt.metrics.add_metric(name="ServerErrors", unit=MetricUnit.Count, value=1)
        return response

    return lambda_handler


# -- the extract function ----------------------------------------------------------------------


def build_sqs_handler() -> Handler:
    """The handler of the extract function: each SQS record is a job; failures are reported per record.

    A record that fails goes back to the queue and is retried. A Lambda timeout kills the process with
    no chance to record anything, so the receive count decides, before any work: the queue's last
    delivery (its maxReceiveCount, MEMLANE_WORKER_MAX_ATTEMPTS here) works no more — it gives the job
    up, so its task says FAILED before SQS moves the message to the dead-letter queue. The deliveries
    before it run the job; a failure on the last of those gives up at once, with its own reason.
    """
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
    from pydantic import Json

    from .domain.models import Task
    from .ports import Job
    from .services import jobs

    class JobRecord(SqsRecordModel):
        """An SQS record whose body is a Job; a body that is not one fails that record alone."""

        body: Json[Job]  # type: ignore[assignment]  # narrows the base model's str

    rt = runtime()
    processor = BatchProcessor(event_type=EventType.SQS, model=JobRecord, raise_on_entire_batch_failure=False)
    last_receive = rt.settings.worker_max_attempts

    def gave_up(job: Job, receives: int, reason: str) -> None:
        rt.logger.error("giving up on the job", extra={"job": job.model_dump(), "receive": receives,
                                                        "reason": reason})
        rt.metrics.add_metric(name="TasksFailed", unit=MetricUnit.Count, value=1)

    def will_retry(job: Job, receives: int, reason: str) -> None:
        rt.logger.warning("job failed; SQS will retry it", extra={"job": job.model_dump(), "receive": receives,
                                                                  "reason": reason})

    def process(record: JobRecord) -> None:
        job = record.body
        rt.logger.set_correlation_id(job.request_id)
        done = jobs.deliver(rt.deps, job, int(record.attributes.ApproximateReceiveCount), last_receive,
                            gave_up=gave_up, will_retry=will_retry)
        if isinstance(done, Task):
            rt.metrics.add_metric(name="MemoriesExtracted", unit=MetricUnit.Count, value=len(done.memory_ids))

    @rt.logger.inject_lambda_context(clear_state=True)  # each record sets its own id; none is the last caller's
    @rt.tracer.capture_lambda_handler(capture_response=False)
    @rt.metrics.log_metrics
    def lambda_handler(event: Event, context: Any) -> dict[str, Any]:
        result = process_partial_response(event=event, record_handler=process, processor=processor,
                                          context=context)
        # Counted here, not in `process`, so records whose body is not a Job count too.
        failures = len(result.get("batchItemFailures", []))
        rt.metrics.add_metric(name="ExtractionFailures", unit=MetricUnit.Count, value=failures)
        return dict(result)

    return lambda_handler


# -- the ingestion queue (an SQS event source of the ingest function) ----------------------------


class AddRefused(Exception):
    """A queued add refused (4xx: bad JSON or body, no grant, a reused request_id). Its record fails: SQS
    delivers it again until the queue's maxReceiveCount, then moves it to the ingestion dead-letter queue,
    where an operator finds it (the reason is in the audit log under its message id) and redrives it once
    fixed (a grant added, a store created). Nothing a producer sent is dropped."""


class AddDeferred(Exception):
    """A queued add that failed for a passing reason (throttled, extraction behind, a dependency down): its
    record fails and SQS delivers it again; its request_id makes the retry a replay if it was written."""


def build_ingest_queue_handler(rt: Runtime | None = None) -> Handler:
    """The handler of the ingest function's SQS event source: each record is one add (api/adds.add_message),
    validated, grant-checked, written and audited as POST .../memories does; failures reported per record."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    from .api.adds import add_message

    rt = rt or runtime()
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    retention = rt.settings.audit_retention_days

    def process(record: Any) -> None:
        sender = record.attributes.sender_id
        rt.logger.set_correlation_id(record.message_id)
        result = add_message(rt.deps, record.body, sender_id=sender, message_id=record.message_id,
                             retention_days=retention)
        if result.outcome in ("accepted", "replayed"):
            rt.metrics.add_metric(name="QueuedAdds", unit=MetricUnit.Count, value=1)
            return
        reason = f"{result.status} {result.error.code}: {result.error.message}" if result.error else str(result.status)
        details = {"sender": sender, "request_id": result.request_id, "reason": reason,
                   "receive": record.attributes.approximate_receive_count}
        if result.outcome == "refused":
            rt.logger.warning("queued add refused; it goes to the dead-letter queue", extra=details)
            rt.metrics.add_metric(name="QueuedAddsRefused", unit=MetricUnit.Count, value=1)
            raise AddRefused(reason)
        rt.logger.warning("queued add failed; SQS will deliver it again", extra=details)
        rt.metrics.add_metric(name="QueuedAddsDeferred", unit=MetricUnit.Count, value=1)
        raise AddDeferred(reason)

    @rt.logger.inject_lambda_context(clear_state=True)  # each record sets its own id; none is the last caller's
    @rt.tracer.capture_lambda_handler(capture_response=False)
    @rt.metrics.log_metrics
    def lambda_handler(event: Event, context: Any) -> dict[str, Any]:
        return dict(process_partial_response(event=event, record_handler=process, processor=processor,
                                             context=context))

    return lambda_handler


# -- the sweeper (a schedule on the tasks function) ----------------------------------------------


def scheduled_context(rt: Runtime) -> Callable[[Handler], Handler]:
    """A scheduled invocation logs under its EventBridge event's id: a warm container's logger kept the last HTTP
    caller's request id, and the scheduler's work on other tenants showed up when that request was traced."""
    return rt.logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE, clear_state=True)


def build_sweep_handler(rt: Runtime | None = None) -> Handler:
    """The sweeper's scheduled handler: tasks whose job was lost are queued again (services/sweep.py)."""
    from .services import sweep

    rt = rt or runtime()

    @scheduled_context(rt)
    @rt.tracer.capture_lambda_handler(capture_response=False)
    @rt.metrics.log_metrics
    def lambda_handler(event: Event, context: Any) -> dict[str, Any]:
        report = sweep.sweep(rt.deps)
        rt.metrics.add_metric(name="TasksRequeued", unit=MetricUnit.Count, value=report.requeued)
        rt.metrics.add_metric(name="TasksSweptFailed", unit=MetricUnit.Count, value=report.failed)
        return vars(report)

    return lambda_handler
