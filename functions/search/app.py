"""Search: hybrid search, reading and editing memories, short-term messages, context cards, thread summaries."""

from memlane.aws_lambda import build_http_handler

lambda_handler = build_http_handler(["search", "context", "summaries"])
