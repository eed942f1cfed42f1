"""The sample events under events/ say what they carry: a signed request's body hash and length are its
body's, an SQS record's MD5 is its body's, and the sample batch holds the jobs the sample adds queue."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.handlers.conftest import Aws
from tests.handlers.events import EVENTS, load_event

SAMPLES = sorted(EVENTS.glob("**/*.json"))


def body_bytes(event: dict) -> bytes:
    return (event.get("body") or "").encode()


@pytest.mark.parametrize("path", [p for p in SAMPLES if "headers" in json.loads(p.read_text())],
                         ids=lambda p: str(p.relative_to(EVENTS)))
def test_a_signed_sample_carries_its_own_body_hash_and_length(path: Path) -> None:
    event = json.loads(path.read_text())
    headers = {k.lower(): v for k, v in event["headers"].items()}
    # SigV4 signs x-amz-content-sha256: API Gateway would refuse a request whose body hashes otherwise.
    assert headers["x-amz-content-sha256"] == hashlib.sha256(body_bytes(event)).hexdigest()
    assert int(headers.get("content-length", "0")) == len(body_bytes(event))


@pytest.mark.parametrize("path", [p for p in SAMPLES if "Records" in json.loads(p.read_text())],
                         ids=lambda p: str(p.relative_to(EVENTS)))
def test_an_sqs_sample_carries_its_own_body_md5(path: Path) -> None:
    for record in json.loads(path.read_text())["Records"]:
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()  # noqa: S324 — SQS's checksum


def test_the_sample_batch_holds_the_jobs_the_sample_adds_queue(aws: Aws, store: str, ingest) -> None:
    for sample in ("add", "add_text"):
        assert ingest(load_event("ingest", sample))["statusCode"] == 202
    queued = sorted((json.loads(m["Body"]) for m in aws.queued()), key=lambda job: job["request_id"])

    batch = [json.loads(r["body"]) for r in load_event("extract", "batch")["Records"]]

    assert batch == queued
