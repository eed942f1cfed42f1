"""Lambda entry points: the wiring every functions/<name>/app.py shares, so each of those is one call.

    lambda_handler = build_http_handler(["search"])      # an API function: the routes of those families
    lambda_handler = build_sqs_handler()                 # the extract function: SQS batches of jobs

Either builder runs once per container, when the function module is imported: settings are read from
the environment, the adapters built (bootstrap.build), the resolver made. An invocation then only
resolves its event. Observability is Powertools: a JSON Logger whose correlation id is the API
Gateway request id (or, for a job, the add's request_id), Tracer (X-Ray) and EMF metrics in the
"memlane" namespace, with the function's service name (POWERTOOLS_SERVICE_NAME) as dimension:

    Requests, Latency (ms), ServerErrors      every API function (search latency = Latency{service=search})
    MemoriesExtracted, ExtractionFailures,    the extract function (failures: records handed back to SQS;
    TasksFailed                               failed tasks: jobs given up on before the dead-letter queue)

`add` is idempotent on the client's `request_id` (Powertools idempotency, when MEMLANE_IDEMPOTENCY_TABLE
is set): a repeat of a successful add is answered from the stored response without touching the
service, so it creates no second task and sends no second queue message. See docs/deploy.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from pydantic import Json

from . import bootstrap
from .api.app import build_api
from .config import Settings
from .domain.models import Task
from .ports import Job
from .services import jobs, sweep
from .services.deps import Deps
from .services.extract import describe

Event = dict[str, Any]
Handler = Callable[[Event, Any], dict[str, Any]]
Resolve = Callable[[Event, Any], dict[str, Any]]

NAMESPACE = "memlane"
# The add's idempotency key: one request_id per store (the path names the store), never across stores.
ADD_KEY = "[requestContext.http.method, rawPath, powertools_json(body).request_id]"
# A repeated request_id must come with the same scope, as the service itself requires.
ADD_PAYLOAD = "powertools_json(body).scope"


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
    return Runtime(settings, bootstrap.build(settings), logger, Tracer(), Metrics(namespace=NAMESPACE))


# -- API functions -----------------------------------------------------------------------------


def build_http_handler(families: Sequence[str], rt: Runtime | None = None) -> Handler:
    """The handler of an API function serving the route families `families` (api.app.FAMILIES).
    `rt`: a runtime the function module already built (one that also handles other events)."""
    rt = rt or runtime()
    api = build_api(rt.deps, families, auth=bootstrap.auth_mode(rt.settings, rt.deps),
                    audit_retention_days=rt.settings.audit_retention_days)
    resolve: Resolve = api.resolve
    store = bootstrap.idempotency_store(rt.settings)
    if store is not None:
        resolve = idempotent_adds(resolve, store)

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


class _NotKept(Exception):
    """Carries an answer that must not be stored: only a success is replayed for a repeated request_id.
    Raising it makes Powertools delete its in-progress record, so a retry after a 4xx/5xx runs again."""

    def __init__(self, response: dict[str, Any]):
        super().__init__(response.get("statusCode"))
        self.response = response


def idempotent_adds(resolve: Resolve, store: BasePersistenceLayer) -> Resolve:
    """`resolve`, with adds that carry a request_id answered at most once per (store, request_id)."""
    config = IdempotencyConfig(event_key_jmespath=ADD_KEY, payload_validation_jmespath=ADD_PAYLOAD,
                               raise_on_no_idempotency_key=False)

    @idempotent_function(data_keyword_argument="event", config=config, persistence_store=store,
                         key_prefix="memlane.add")
    def answer(event: Event, context: Any) -> dict[str, Any]:
        response = resolve(event, context)
        if not 200 <= int(response.get("statusCode", 500)) < 300:
            raise _NotKept(response)
        return response

    def resolve_once(event: Event, context: Any) -> dict[str, Any]:
        if not _carries_request_id(event):
            return resolve(event, context)
        config.register_lambda_context(context)
        try:
            return answer(event=event, context=context)
        except _NotKept as refused:
            return refused.response
        except IdempotencyValidationError:
            return _error(409, "request_id_in_use", "request_id was already used with another scope", "request_id")
        except IdempotencyAlreadyInProgressError:
            return _error(409, "request_in_progress", "an add with this request_id is in progress; retry shortly",
                          "request_id")
        except IdempotencyPersistenceLayerError:
            return _error(503, "retryable", "the idempotency store is unavailable; retry with the same request_id")

    return resolve_once


def _carries_request_id(event: Event) -> bool:
    """Only a POST with a JSON object body naming a request_id goes through the idempotency store."""
    if ((event.get("requestContext") or {}).get("http") or {}).get("method") != "POST":
        return False
    if event.get("isBase64Encoded") or not isinstance(event.get("body"), str):
        return False
    try:
        body = json.loads(event["body"])
    except ValueError:
        return False  # the resolver answers 400
    return isinstance(body, dict) and isinstance(body.get("request_id"), str) and bool(body["request_id"])


def _error(status: int, code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, **({"field": field} if field else {})}
    return {"statusCode": status, "headers": {"Content-Type": "application/json"},
            "body": json.dumps({"error": error}), "isBase64Encoded": False}


# -- the extract function ----------------------------------------------------------------------


class JobRecord(SqsRecordModel):
    """An SQS record whose body is a Job; a body that is not one fails that record alone."""

    body: Json[Job]  # type: ignore[assignment]  # narrows the base model's str


def build_sqs_handler() -> Handler:
    """The handler of the extract function: each SQS record is a job; failures are reported per record.

    A record that fails goes back to the queue and is retried; on its last receive (the queue's
    maxReceiveCount, MEMLANE_WORKER_MAX_ATTEMPTS here) the job is given up on first, so its task
    says FAILED before SQS moves the message to the dead-letter queue.
    """
    rt = runtime()
    processor = BatchProcessor(event_type=EventType.SQS, model=JobRecord, raise_on_entire_batch_failure=False)
    last_receive = rt.settings.worker_max_attempts

    def process(record: JobRecord) -> None:
        job = record.body
        rt.logger.set_correlation_id(job.request_id)
        receives = int(record.attributes.ApproximateReceiveCount)
        try:
            done = jobs.handle(rt.deps, job)
        except Exception as error:  # noqa: BLE001 — the worker boundary: any failure is a failed attempt
            if receives < last_receive:
                rt.logger.warning("job failed; SQS will retry it", extra={"job": job.model_dump(),
                                  "receive": receives, "reason": describe(error)})
                raise
            rt.logger.error("job failed on its last receive; giving up", extra={"job": job.model_dump(),
                            "receive": receives, "reason": describe(error)})
            jobs.give_up(rt.deps, job, describe(error))
            rt.metrics.add_metric(name="TasksFailed", unit=MetricUnit.Count, value=1)
            raise
        if isinstance(done, Task):
            rt.metrics.add_metric(name="MemoriesExtracted", unit=MetricUnit.Count, value=len(done.memory_ids))

    @rt.logger.inject_lambda_context
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


# -- the sweeper (a schedule on the tasks function) ----------------------------------------------


def build_sweep_handler(rt: Runtime | None = None) -> Handler:
    """The sweeper's scheduled handler: tasks whose job was lost are queued again (services/sweep.py)."""
    rt = rt or runtime()

    @rt.logger.inject_lambda_context
    @rt.tracer.capture_lambda_handler(capture_response=False)
    @rt.metrics.log_metrics
    def lambda_handler(event: Event, context: Any) -> dict[str, Any]:
        report = sweep.sweep(rt.deps)
        rt.metrics.add_metric(name="TasksRequeued", unit=MetricUnit.Count, value=report.requeued)
        rt.metrics.add_metric(name="TasksSweptFailed", unit=MetricUnit.Count, value=report.failed)
        return vars(report)

    return lambda_handler
