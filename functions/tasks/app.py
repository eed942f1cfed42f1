"""Tasks: extraction status, the scope registry and access policies, the audit log."""

from memlane.aws_lambda import build_http_handler

lambda_handler = build_http_handler(["tasks"])
