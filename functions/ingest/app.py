"""Ingest: add (idempotent on request_id; infer: false writes memories as given; many at once with
memories:batch), the store catalog, threads (create, get, list, delete) and actor profiles (tenant and agent,
stated and distilled); and, from its SQS event source, the adds producers send to the ingestion queue."""

from typing import Any

from memlane.aws_lambda import build_http_handler, build_ingest_queue_handler, runtime

_rt = runtime()
http = build_http_handler(["ingest", "stores", "threads", "profiles"], _rt)
queue = build_ingest_queue_handler(_rt)


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "Records" in event:  # a batch of the ingestion queue
        return queue(event, context)
    return http(event, context)  # an HTTP API request
