"""The context card on the AWS path: the search function serves it, with the shipped tokenizer."""

from __future__ import annotations

import json

from tests.handlers.conftest import ACCOUNT, Aws, Bedrock, unit
from tests.handlers.events import load_event

BEAGLE = "Ann adopted a beagle named Max on 2024-03-09."


def test_the_search_function_builds_a_threads_card_within_its_budget(aws: Aws, bedrock: Bedrock, store: str,
                                                                     ingest) -> None:
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202
    bedrock.extraction([{"text": BEAGLE, "memory_type": "event", "evidence": [0], "event_time": "2024-03-09",
                         "importance": 0.8}])
    bedrock.embedding(BEAGLE, unit(3))
    assert aws.load("extract")(aws.sqs_event(aws.queued())) == {"batchItemFailures": []}
    search = aws.load("search")
    # The default query is the thread's latest user turn (and the turns just before it).
    bedrock.embedding("I adopted a beagle named Max last Saturday.", unit(3))

    response = search(load_event("search", "context"))

    assert response["statusCode"] == 200, response
    card = json.loads(response["body"])
    assert [e["text"] for e in card["sections"]["recent"]] == [
        "Ann: I adopted a beagle named Max last Saturday.", "assistant: Congratulations! Beagles are lovely dogs."]
    # The memory says what the recent turn it came from says: not repeated.
    assert card["sections"]["memories"] == []
    assert list(card["sections"]) == ["agent_profile", "user_profile", "summary", "memories", "plans", "recent"]
    assert card["tokens"]["tokenizer"] == "hf:all-minilm-l6-v2" and 0 < card["tokens"]["total"] <= 200
    assert card["evidence"] == [e["id"] for e in card["sections"]["recent"]]


def test_a_principal_granted_another_tenant_is_refused(aws: Aws, bedrock: Bedrock, store: str, ingest) -> None:
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import access

    access.grant(bootstrap.build(Settings.from_env()), f"arn:aws:iam::{ACCOUNT}:role/intruder", {"support": ["u-43"]})
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202
    event = load_event("search", "context")
    event["requestContext"]["authorizer"]["iam"]["userArn"] = f"arn:aws:sts::{ACCOUNT}:assumed-role/intruder/s1"

    response = aws.load("search")(event)

    assert response["statusCode"] == 403 and json.loads(response["body"])["error"]["code"] == "outside_grant"
    assert "beagle" not in response["body"].lower()
