"""An add within every documented limit (20 messages of 30,000 characters) on the AWS path with the deterministic
extractor: its task's SUCCEEDED write carried every outcome's full text, past DynamoDB's 400 KB item limit, on
every delivery — the job ended FAILED and the memories it wrote stayed, named by no task (AWS adversarial trial:
fails before). An outcome now keeps the start of its statement; the memory holds it whole."""

from __future__ import annotations

import json
import random

import pytest

from memlane.domain import limits
from tests.handlers.conftest import Aws
from tests.handlers.events import load_event, with_body

TENANT_PK = "demo#support#u-42"


@pytest.fixture()
def no_models(monkeypatch):
    for name, value in {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "none", "MEMLANE_RERANKER": "heuristic"}.items():
        monkeypatch.setenv(name, value)


def test_an_accepted_large_add_is_extracted_and_its_task_names_its_memories(aws: Aws, bedrock, granted,
                                                                             no_models) -> None:
    ingest = aws.load("ingest")
    assert ingest(load_event("ingest", "create_store"))["statusCode"] == 201
    rnd = random.Random(7)
    words = [f"w{i}x" for i in range(5000)]
    messages = [{"role": "user", "name": "Ann",
                 "content": ("I like " + " ".join(rnd.choice(words) for _ in range(6000)))[:30_000]}
                for _ in range(20)]
    event = load_event("ingest", "add")
    accepted = ingest(with_body(event, {**json.loads(event["body"]), "request_id": "big-1", "messages": messages}))
    assert accepted["statusCode"] == 202, accepted

    assert aws.load("extract")(aws.sqs_event(aws.queued())) == {"batchItemFailures": []}
    [task] = aws.items(TENANT_PK, "TASK#big-1")
    memories = {m["memory_id"]: m["text"] for m in aws.items(TENANT_PK, "MEM#")}
    assert task["status"] == "SUCCEEDED", task.get("error")
    assert memories and {o["memory_id"] for o in task["outcomes"]} == set(memories)
    for o in task["outcomes"]:
        whole = memories[o["memory_id"]]
        assert len(o["text"]) <= limits.MAX_OUTCOME_TEXT_CHARS and whole.startswith(o["text"].rstrip("…"))
    assert max(map(len, memories.values())) > limits.MAX_OUTCOME_TEXT_CHARS  # the memories themselves are whole
