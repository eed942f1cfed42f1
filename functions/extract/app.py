"""Extract: SQS batches of jobs (extraction, erasure), with per-record failure reporting."""

from memlane.aws_lambda import build_sqs_handler

lambda_handler = build_sqs_handler()
