"""Ingest: add (idempotent on request_id; infer: false writes memories as given; many at once with
memories:batch), the store catalog, threads (create, get, list, delete) and actor profiles (tenant and agent,
stated and distilled); and, from its SQS event source, the adds producers send to the ingestion queue."""

from typing import Any

from memlane.aws_lambda import Handler, build_http_handler, build_ingest_queue_handler, runtime

_rt = runtime()
http = build_http_handler(["ingest", "stores", "threads", "profiles"], _rt)
_queue: Handler | None = None


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _queue
    if "Records" in event:  # a batch of the ingestion queue
        # Built on the first batch of this container: an HTTP cold start does not import the batch machinery.
        _queue = _queue or build_ingest_queue_handler(_rt)
        return _queue(event, context)
    return http(event, context)  # an HTTP API request
