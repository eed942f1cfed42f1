"""Dream: the dream routes (API Gateway), and the EventBridge schedule, which picks due scopes (bounded) and
queues one `dream` job per scope; the extract function's queue worker runs them (jobs.handle)."""

from typing import Any, Callable

from aws_lambda_powertools.metrics import MetricUnit

from memlane.aws_lambda import build_http_handler, runtime, scheduled_context
from memlane.services import dream

_rt = runtime()
http = build_http_handler(["dream"], _rt)
_scheduled: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None


def schedule_handler() -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    rt = _rt

    @scheduled_context(rt)
    @rt.tracer.capture_lambda_handler(capture_response=False)
    @rt.metrics.log_metrics
    def scheduled(event: dict[str, Any], context: Any) -> dict[str, Any]:
        tasks = dream.schedule(rt.deps)
        rt.metrics.add_metric(name="DreamsScheduled", unit=MetricUnit.Count, value=len(tasks))
        rt.logger.info("dream run", extra={"rule": event.get("resources"), "scheduled": len(tasks)})
        return {"scheduled": len(tasks),
                "tasks": [{"store": t.store, "task_id": t.task_id, **t.scope.model_dump()} for t in tasks]}

    return scheduled


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _scheduled
    if "requestContext" in event:  # an HTTP API request
        return http(event, context)
    _scheduled = _scheduled or schedule_handler()  # built on the first scheduled event of this container
    return _scheduled(event, context)
