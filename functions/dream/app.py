"""Dream: the EventBridge schedule picks due scopes (bounded) and queues a dream job for each, which the
extract function's queue worker runs (jobs.handle); API Gateway events are the dream routes."""

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from memlane.aws_lambda import build_http_handler, runtime
from memlane.services import dream

rt = runtime()
_http: Any = None


@rt.logger.inject_lambda_context
@rt.tracer.capture_lambda_handler(capture_response=False)
@rt.metrics.log_metrics
def scheduled(event: dict[str, Any], context: Any) -> dict[str, Any]:
    tasks = dream.schedule(rt.deps)
    rt.metrics.add_metric(name="DreamsScheduled", unit=MetricUnit.Count, value=len(tasks))
    rt.logger.info("dream run", extra={"rule": event.get("resources"), "scheduled": len(tasks)})
    return {"scheduled": len(tasks), "tasks": [{"store": t.store, "task_id": t.task_id, **t.scope.model_dump()}
                                               for t in tasks]}


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _http
    if "requestContext" in event:  # an HTTP API request: the dream family of routes
        _http = _http or build_http_handler(["dream"])
        return _http(event, context)
    return scheduled(event, context)
