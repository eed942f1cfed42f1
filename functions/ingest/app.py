"""Ingest: add (idempotent on request_id) and the store catalog (create, list, get, delete)."""

from memlane.aws_lambda import build_http_handler

lambda_handler = build_http_handler(["ingest", "stores"])
