"""Ingest: add (idempotent on request_id; infer: false writes memories as given), the store catalog,
threads (create, get, list, delete) and actor profiles (tenant and agent, stated and distilled)."""

from memlane.aws_lambda import build_http_handler

lambda_handler = build_http_handler(["ingest", "stores", "threads", "profiles"])
