"""Tasks: extraction status, the scope registry and access policies, the audit log; and, on its
schedule (template.yaml `Sweep`), the sweeper that queues again tasks whose job was lost."""

from typing import Any

from memlane.aws_lambda import Handler, build_http_handler, build_sweep_handler, runtime

_rt = runtime()
http = build_http_handler(["tasks"], _rt)
_sweep: Handler | None = None


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _sweep
    if "requestContext" in event:  # an HTTP API request
        return http(event, context)
    # The EventBridge schedule. Built on its first event of this container: the sweeper imports the job
    # machinery (extraction, dreams, erasure), which no HTTP cold start needs.
    _sweep = _sweep or build_sweep_handler(_rt)
    return _sweep(event, context)
