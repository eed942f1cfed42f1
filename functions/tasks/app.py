"""Tasks: extraction status, the scope registry and access policies, the audit log; and, on its
schedule (template.yaml `Sweep`), the sweeper that queues again tasks whose job was lost."""

from typing import Any

from memlane.aws_lambda import build_http_handler, build_sweep_handler, runtime

_rt = runtime()
http = build_http_handler(["tasks"], _rt)
sweep = build_sweep_handler(_rt)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "requestContext" in event:  # an HTTP API request
        return http(event, context)
    return sweep(event, context)  # the EventBridge schedule
